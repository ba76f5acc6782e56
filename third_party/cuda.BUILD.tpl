# Generated from //third_party:cuda.BUILD.tpl: the CUDA toolkit at {path}.
package(default_visibility = ["//visibility:public"])

exports_files(["bin/nvcc"])

# nvcc finds cicc, ptxas and friends relative to argv[0] without resolving
# symlinks, so they must be declared inputs next to bin/nvcc.
filegroup(
    name = "nvcc_toolkit",
    srcs = glob(["bin/**", "nvvm/**"]),
)

# The toolkit include dir is not a compiler builtin: expose it with -isystem.
cc_library(
    name = "cuda_headers",
    hdrs = glob(["include/**"]),
    includes = ["include", "include/cccl"],
)

# A versioned .so in srcs is symlinked into _solib with an $ORIGIN rpath.
cc_library(
    name = "cudart",
    srcs = ["lib/libcudart.so.13"],
    linkopts = ["-ldl", "-lrt", "-pthread"],
    deps = [":cuda_headers"],
)

cc_library(
    name = "cudart_static",
    srcs = ["lib/libcudart_static.a"],
    linkopts = ["-ldl", "-lrt", "-pthread"],
    deps = [":cuda_headers"],
)

cc_library(name = "cublasLt", srcs = ["lib/libcublasLt.so.13"], deps = [":cudart"])

cc_library(name = "nccl", srcs = ["lib/libnccl.so.2"], deps = [":cudart"])

# Only a link-time stub; the real libcuda.so comes with the driver.
cc_library(name = "cuda_driver_stub", srcs = ["lib/stubs/libcuda.so"], deps = [":cuda_headers"])
