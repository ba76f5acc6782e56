"""cuda_library: compile .cu files with nvcc into a cc_library (Bazel 4.2, no rules_cuda).

cuda_library(name, srcs=[*.cu], hdrs, deps) yields a cc_library `name` that any
cc_* target can depend on. nvcc runs once per .cu with -fPIC and the objects are
packed into a static archive through cc_common.

GPU code: SASS for sm_90a (H100/H200, wgmma/TMA capable) and sm_80 (A100),
plus compute_90 PTX so newer GPUs can JIT. When @local_cuda found no toolkit,
the targets are incompatible: wildcard builds skip them, and naming one
explicitly fails with `cuda_toolkit_was_not_found` in the dependency chain.
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")
load("@local_cuda//:defs.bzl", "CUDA_AVAILABLE", "CUDA_COMPATIBLE_WITH")

DEFAULT_CUDA_ARCHS = ["sm_90a", "sm_80"]
DEFAULT_CUDA_PTX = ["compute_90"]

def _gencode_flags(archs, ptx):
    flags = []
    for a in archs:  # "sm_90a" -> arch=compute_90a,code=sm_90a
        flags.append("-gencode=arch=compute_%s,code=%s" % (a[len("sm_"):], a))
    for p in ptx:  # "compute_90" -> embedded PTX for JIT on newer GPUs
        flags.append("-gencode=arch=%s,code=%s" % (p, p))
    return flags

def _cuda_objects_impl(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    feature_configuration = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )
    dep_info = cc_common.merge_cc_infos(cc_infos = [d[CcInfo] for d in ctx.attr.deps])
    dctx = dep_info.compilation_context

    mode_flags = {
        "opt": ["-O3", "-DNDEBUG", "-lineinfo"],
        "dbg": ["-g", "-O0", "-lineinfo"],
        "fastbuild": ["-O2", "-lineinfo"],
    }[ctx.var["COMPILATION_MODE"]]

    common = [
        "-x", "cu", "-std=" + ctx.attr.std, "-ccbin", cc_toolchain.compiler_executable,
        "-Xcompiler", "-fPIC", "--expt-relaxed-constexpr", "-I.", "-I" + ctx.bin_dir.path,
    ]
    common += _gencode_flags(ctx.attr.gpu_archs, ctx.attr.ptx_archs)
    common += mode_flags
    for inc in dctx.includes.to_list() + dctx.quote_includes.to_list():
        common += ["-I", inc]
    for inc in dctx.system_includes.to_list():
        common += ["-isystem", inc]
    for d in dctx.defines.to_list() + ctx.attr.defines:
        common.append("-D" + d)
    common += ctx.attr.copts

    inputs = depset(
        ctx.files.srcs + ctx.files.hdrs,
        transitive = [dctx.headers, cc_toolchain.all_files, depset(ctx.files._nvcc_toolkit)],
    )
    objs = []
    for src in ctx.files.srcs:
        obj = ctx.actions.declare_file("_cuda_objs/%s/%s.o" % (ctx.label.name, src.basename.rsplit(".", 1)[0]))
        ctx.actions.run(
            executable = ctx.file._nvcc,
            arguments = common + ["-c", src.path, "-o", obj.path],
            inputs = inputs,
            outputs = [obj],
            mnemonic = "NvccCompile",
            progress_message = "nvcc %s" % src.short_path,
            env = {"PATH": "/usr/bin:/bin", "TMPDIR": "/tmp"},
        )
        objs.append(obj)

    compilation_outputs = cc_common.create_compilation_outputs(
        objects = depset(objs),
        pic_objects = depset(objs),
    )
    linking_context, _ = cc_common.create_linking_context_from_compilation_outputs(
        actions = ctx.actions,
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        compilation_outputs = compilation_outputs,
        linking_contexts = [dep_info.linking_context],
        name = ctx.label.name,
        alwayslink = ctx.attr.alwayslink,
        disallow_dynamic_library = True,
    )
    return [
        DefaultInfo(files = depset(objs)),
        CcInfo(compilation_context = dctx, linking_context = linking_context),
    ]

cuda_objects = rule(
    implementation = _cuda_objects_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = [".h", ".cuh"]),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(),
        "defines": attr.string_list(),
        "std": attr.string(default = "c++20"),
        "gpu_archs": attr.string_list(default = DEFAULT_CUDA_ARCHS),
        "ptx_archs": attr.string_list(default = DEFAULT_CUDA_PTX),
        "alwayslink": attr.bool(default = False),
        "_nvcc": attr.label(
            default = "@local_cuda//:bin/nvcc",
            allow_single_file = True,
            executable = True,
            cfg = "exec",
        ),
        "_nvcc_toolkit": attr.label(default = "@local_cuda//:nvcc_toolkit", cfg = "exec"),
        "_cc_toolchain": attr.label(default = "@bazel_tools//tools/cpp:current_cc_toolchain"),
    },
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
    fragments = ["cpp"],
    incompatible_use_toolchain_transition = True,
)

def cuda_library(name, srcs = [], hdrs = [], deps = [], copts = [], defines = [], std = "c++20",
                 gpu_archs = DEFAULT_CUDA_ARCHS, ptx_archs = DEFAULT_CUDA_PTX,
                 alwayslink = False, visibility = None, **kwargs):
    """A cc_library whose .cu srcs are compiled by nvcc. Skipped when CUDA is missing."""
    cc_deps = deps + ["@local_cuda//:cuda_headers", "@local_cuda//:cudart"]
    if not CUDA_AVAILABLE:
        native.cc_library(
            name = name,
            hdrs = hdrs,
            target_compatible_with = CUDA_COMPATIBLE_WITH,
            visibility = visibility,
            **kwargs
        )
        return
    cuda_objects(
        name = name + "_cu",
        srcs = srcs,
        hdrs = hdrs,
        deps = cc_deps,
        copts = copts,
        defines = defines,
        std = std,
        gpu_archs = gpu_archs,
        ptx_archs = ptx_archs,
        alwayslink = alwayslink,
        visibility = ["//visibility:private"],
        **kwargs
    )
    native.cc_library(
        name = name,
        hdrs = hdrs,
        deps = [name + "_cu"] + cc_deps,
        alwayslink = alwayslink,
        visibility = visibility,
        **kwargs
    )

def cuda_cc_library(name, deps = [], **kwargs):
    """A plain C++ cc_library that uses the CUDA runtime API (no device code)."""
    native.cc_library(
        name = name,
        deps = deps + ["@local_cuda//:cuda_headers", "@local_cuda//:cudart"],
        target_compatible_with = CUDA_COMPATIBLE_WITH + kwargs.pop("target_compatible_with", []),
        **kwargs
    )

def cuda_cc_test(name, deps = [], tags = [], **kwargs):
    """A GPU test: tagged `gpu` (CI filters it out) and skipped without CUDA."""
    native.cc_test(
        name = name,
        deps = deps,
        tags = tags + ["gpu"],
        target_compatible_with = CUDA_COMPATIBLE_WITH,
        **kwargs
    )
