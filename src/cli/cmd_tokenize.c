/* placeholder until the real command lands (replaced in this session) */
#include <stdio.h>
#include "cli.h"
int sl__cmd_tokenize(int argc, char **argv)
{
    (void)argc;
    fprintf(stderr, "%s: not built yet\n", argv[0]);
    return 2;
}
