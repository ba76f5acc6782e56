// Exits 0 only if libweft_fake_dep.so was found and loaded.
extern "C" int weft_fake_dep_answer();
int main() { return weft_fake_dep_answer() == 42 ? 0 : 1; }
