#ifndef FANOUT_FUZZ_CLIBFUZZER_H
#define FANOUT_FUZZ_CLIBFUZZER_H

#include <stddef.h>
#include <stdint.h>

/// libFuzzer's driver (compiler-rt FuzzerDriver.cpp), linked in by `-sanitize=fuzzer`: parses the
/// libFuzzer flags in argv and runs `callback` on every input. Calling it from a Swift `main` keeps
/// SwiftPM's usual executable linking (libFuzzer's own `main` is then not pulled in).
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
