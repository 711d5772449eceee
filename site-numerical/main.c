/* drths-numerical: placeholder until the reference run is wired. */
#include <stdio.h>
int main(void)
{
    fprintf(stderr, "drths-numerical: not yet implemented\n");
    return 1;
}
