/* Fuzz target: any bytes through every /proc and /sys text parser of
 * telemetry/machine. The bytes are passed with their length and no NUL, as
 * a read() would leave them; nothing may crash or read past them. The seed
 * corpus is the recorded fixtures of tests/fixtures/proc. */
#include <stddef.h>
#include <stdint.h>

#include "telemetry/machine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sl__proc_stat_t ps; /* ~16 KiB */
    const char *t = (const char *)data;
    sl__psi_t psi;
    sl__self_io_t io;
    sl__disk_t disk;
    sl__net_t net;
    uint64_t a, b;
    (void)sl__parse_proc_stat(t, size, &ps);
    (void)sl__parse_psi(t, size, &psi);
    (void)sl__parse_meminfo(t, size, &a, &b);
    (void)sl__parse_pid_stat(t, size, &a);
    (void)sl__parse_status_rss(t, size, &a);
    (void)sl__parse_self_io(t, size, &io);
    (void)sl__parse_diskstats(t, size, "vda", &disk);
    (void)sl__parse_net_dev(t, size, &net);
    (void)sl__parse_u64_text(t, size, &a);
    char v2[256], v1[256];
    double cpus;
    (void)sl__parse_cgroup_paths(t, size, "cpu", v2, v1, sizeof v2);
    (void)sl__parse_mem_max(t, size, &a);
    (void)sl__parse_cpu_max(t, size, &cpus);
    return 0;
}
