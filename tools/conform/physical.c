/* drths-conform --role physical: placeholder until the actuator-site checks are written. */
#include "tools/conform/conform.h"

void conform_run_physical(conform_t *c)
{
    conform_skip(c, "physical", "not implemented");
}
