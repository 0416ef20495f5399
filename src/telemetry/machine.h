/* telemetry/machine: what the machine is doing, read from /proc and /sys
 * (and NVML where a driver is present). Parsers take the file's text, so
 * tests feed recorded fixtures; readers take a root directory ("/" on a
 * live system) for the same reason. Depends on base only. */
#ifndef SL_MACHINE_H
#define SL_MACHINE_H

#include <stddef.h>
#include <stdint.h>

#define SL_MAX_CPUS 1024

/* Cumulative counters, as the kernel gives them. */
typedef struct sl__cpu_times {
    uint64_t busy, total; /* jiffies: busy = total - idle - iowait */
} sl__cpu_times_t;

typedef struct sl__proc_stat {
    sl__cpu_times_t all;
    int ncpu;
    sl__cpu_times_t cpu[SL_MAX_CPUS];
    int procs_running; /* run queue length (procs_running) */
} sl__proc_stat_t;
/* cpu[i] is the line "cpuI", so CPUs keep their number across samples;
 * ncpu = highest I + 1 (capped at SL_MAX_CPUS), and an offline CPU in a gap
 * reads as zeros. The struct is ~16 KiB: keep it off small stacks. */

/* PSI "some avg10" and cumulative "some total" (us); present = 0 when the
 * file is absent (older kernels, containers without PSI). avg10 is in
 * percent (0..100), as the kernel prints it; no "full" line = full 0. */
typedef struct sl__psi {
    int present;
    double some_avg10, full_avg10;
    uint64_t some_total_us, full_total_us;
} sl__psi_t;

typedef struct sl__self_io {
    uint64_t read_bytes, write_bytes, rchar, wchar;
} sl__self_io_t;

typedef struct sl__disk {
    uint64_t read_bytes; /* sectors read x 512 */
    uint64_t io_ms;      /* time spent doing I/Os (ms) */
} sl__disk_t;

typedef struct sl__net {
    uint64_t rx_bytes, tx_bytes; /* all interfaces but lo */
} sl__net_t;

/* A GPU as NVML reports it; valid = 0 when there is none. With valid = 1 a
 * query that failed on its own leaves its field "absent": util, jpg_util,
 * power_w, the pcie rates and energy_j < 0; mem_used = mem_total = 0. */
typedef struct sl__gpu {
    int valid;
    int count;
    int index;       /* NVML's index of the GPU read; < 0 unknown */
    double util;     /* 0..1 */
    double jpg_util; /* 0..1: its JPEG decoders (NVML >= 11), or < 0 */
    uint64_t mem_used, mem_total;
    double power_w;
    double pcie_rx_bytes_per_s, pcie_tx_bytes_per_s;
    double energy_j; /* NVML total energy since driver load, or < 0 */
} sl__gpu_t;

/* ---- parsers: text in, struct out; 0 or SL_ECORRUPT. Never crash.
 * `text` need not be NUL-terminated: no byte at or past text[n] is read.
 * On error *out is unspecified. Stateless, so any thread may call them. */
int sl__parse_proc_stat(const char *text, size_t n, sl__proc_stat_t *out);
int sl__parse_psi(const char *text, size_t n, sl__psi_t *out);
/* MemTotal / MemAvailable in bytes. */
int sl__parse_meminfo(const char *text, size_t n, uint64_t *total,
                      uint64_t *available);
/* utime + stime of /proc/<pid>/stat (jiffies); handles ')' in comm. */
int sl__parse_pid_stat(const char *text, size_t n, uint64_t *cpu_jiffies);
/* VmRSS of /proc/self/status in bytes. */
int sl__parse_status_rss(const char *text, size_t n, uint64_t *rss);
int sl__parse_self_io(const char *text, size_t n, sl__self_io_t *out);
/* The line of /proc/diskstats for device `dev` (e.g. "vda");
 * SL_ENOTFOUND when no line names it, SL_EINVAL for a NULL or "" dev. */
int sl__parse_diskstats(const char *text, size_t n, const char *dev,
                        sl__disk_t *out);
int sl__parse_net_dev(const char *text, size_t n, sl__net_t *out);

/* A sysfs-style file holding one unsigned number and maybe a newline. */
int sl__parse_u64_text(const char *text, size_t n, uint64_t *v);

/* ---- the cgroup's CPU and memory limits (telemetry/cgroup.c) */
/* /proc/self/cgroup: the v2 line's path ("0::PATH") into v2, the path of
 * the v1 line whose controllers hold ctl ("cpu", "memory") into v1 (""
 * where absent). 0; SL_ECORRUPT for a line that is not
 * "N:CONTROLLERS:/PATH" or a path that does not fit cap. */
int sl__parse_cgroup_paths(const char *text, size_t n, const char *ctl,
                           char *v2, char *v1, size_t cap);
/* cgroup v2 cpu.max, "QUOTA PERIOD" or "max PERIOD": *cpus = QUOTA /
 * PERIOD, 0 for "max" (no limit). 0 or SL_ECORRUPT. */
int sl__parse_cpu_max(const char *text, size_t n, double *cpus);
/* cgroup v2 memory.max or v1 memory.limit_in_bytes: *bytes, 0 for no
 * limit ("max", or v1's 2^63 - page size: any value >= 2^62). 0 or
 * SL_ECORRUPT. */
int sl__parse_mem_max(const char *text, size_t n, uint64_t *bytes);
/* The cgroup's memory limit in bytes (root as sl__read_cgroup_cpus's):
 * the lowest from its cgroup up to the root, 0 when none or unreadable. */
uint64_t sl__read_cgroup_memory(const char *root);
/* The CPUs the cgroup quota gives this process (root "/" live, or a
 * fixture tree holding proc/self/cgroup and sys/fs/cgroup): the lowest
 * quota from its cgroup up to the root, 0 when none or unreadable. */
double sl__read_cgroup_cpus(const char *root);
/* The CPUs this process can use: its affinity mask (sl__ncpu), lowered
 * to the cgroup quota rounded up. What thread defaults, budgets and the
 * scheduler's core counts go by. */
int sl__cpus_usable(void);

/* The files this process has open now (entries of /proc/self/fd, less
 * the one reading it); 3 (stdin, stdout, stderr) where it cannot tell. */
int sl__fds_open(void);

/* ---- readers on a live system (root "/" or a fixture tree) */
/* Reads a small file into buf (NUL-terminated); returns bytes or -1.
 * A file that does not fit in cap - 1 bytes is -1 too (errno EFBIG): a
 * cut /proc file would parse as wrong numbers. root "" or "/" is live. */
long sl__read_small(const char *root, const char *rel, char *buf, size_t cap);
/* proc/pressure/<resource> ("cpu", "io", "memory") under root. A missing
 * file, or one the kernel refuses to read (booted psi=0), is no error:
 * 0 with out->present = 0. Malformed text is SL_ECORRUPT. */
int sl__read_psi(const char *root, const char *resource, sl__psi_t *out);
/* The block device holding `path` (e.g. "vda" for a partition vda1's
 * parent), from its st_dev and /sys/dev/block; "" if unknown.
 * @return 0; SL_ENOTFOUND (dev "") for overlay, tmpfs, btrfs and other
 * anonymous devices (major 0) or a device sysfs does not know; SL_EIO when
 * path cannot be stat'ed; SL_ERANGE when the name does not fit devlen. */
int sl__disk_for_path(const char *path, char *dev, size_t devlen);
/* The same from a device number, under sysfs root `root` ("/" live). */
int sl__disk_for_devnum(const char *root, unsigned maj, unsigned min, char *dev,
                        size_t devlen);
/* RAPL package energy in joules summed over packages, from
 * /sys/class/powercap/intel-rapl:*\/energy_uj (handling wrap with
 * max_energy_range_uj); < 0 when unreadable. `state` keeps the last raw
 * readings between calls (zero-init). */
typedef struct sl__rapl {
    int n;
    uint64_t last_uj[16], max_uj[16];
    double total_j;
    int init;
    uint32_t seen; /* bit N: last_uj[N] holds a reading of intel-rapl:N */
} sl__rapl_t;
/* Only top-level zones intel-rapl:N (packages, N < 16) count; subzones
 * intel-rapl:N:M are parts of a package and would count twice. Returns
 * total_j (0 on the first readable call) or -1 when no package's
 * energy_uj can be read (VMs, containers, and non-root on kernels >= 5.10
 * where energy_uj is 0400): the value is never invented. */
double sl__rapl_read(sl__rapl_t *r, const char *root);

/* NVML loaded with dlopen("libnvidia-ml.so.1") on first use (from the
 * directories of SL_CUDA_LIB_PATH first when it is set, as gpu/rt.h looks
 * for the CUDA libraries, then the system's search); no GPU, no library,
 * or any NVML error = g->valid 0. Thread-safe. Reports the GPU with the
 * PCI bus id given (cudaDeviceGetPCIBusId's "0000:3b:00.0": the GPU
 * stage's, as NVML's indices need not be CUDA's), else GPU 0 (where
 * NVML cannot find that id: GPU 0 if it is the only one, else valid 0),
 * and the count. The PCIe query
 * samples for ~20 ms per direction inside NVML, so a call may take
 * ~40 ms: sample from a telemetry thread, not a hot path. The library
 * stays loaded and initialised until exit. */
void sl__gpu_read(sl__gpu_t *g, const char *pci_bus_id);
/* How many GPUs NVML sees (0: none, or no NVML), cheaply. NVML is the
 * driver's own library: asking it starts no CUDA context, so a process
 * may ask before deciding whether to start CUDA at all. */
int sl__gpu_count(void);

#endif
