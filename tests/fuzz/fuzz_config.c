/* libFuzzer target for the experiment-file loader: any bytes must give 0 or a negative code with
 * a message, never a crash, a leak or a read outside the buffer. Seed corpus: the YAML files
 * under examples and tests/data/config. Relative record paths resolve against /nonexistent, so
 * record checks fail cleanly rather than touching files. */
#include <stddef.h>
#include <stdint.h>

#include "common/config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    drths_experiment_t exp;
    drths_error_t err;
    if (drths_experiment_load_buffer(&exp, (const char *)data, size, "/nonexistent/fuzz.yaml",
                                     &err) == 0)
        drths_experiment_close(&exp);
    return 0;
}
