/* gpu/rt: the CUDA runtime and nvJPEG loaded at run time, tested with
 * stand-in libraries built in the test tree (tests/CMakeLists.txt,
 * fake_cuda/): no CUDA, no GPU needed. Each case names its status. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/rt.h"
#include "testutil.h"

#define DIR(c) SL_FAKE_CUDA "/" c

static void test_no_library_names_the_folders(void **state)
{
    (void)state;
    sl__gpu_rt_t rt;
    sl__gpu_status_t st;
    const char *search = DIR("empty") ":/nonexistent/sl-cuda";
    assert_int_equal(sl__gpu_rt_load(search, &rt, &st), 0);
    assert_int_equal(st.available, 0);
    assert_null(rt.cudart);
    assert_non_null(strstr(st.reason, "no libcudart.so.12 found in"));
    assert_non_null(strstr(st.reason, DIR("empty")));
    assert_non_null(strstr(st.reason, "/nonexistent/sl-cuda"));
    /* An explicit search does not fall back on the system's. */
    assert_null(strstr(st.reason, "system paths"));
}

static void test_missing_symbol_is_named(void **state)
{
    (void)state;
    sl__gpu_rt_t rt;
    sl__gpu_status_t st;
    assert_int_equal(sl__gpu_rt_load(DIR("missing"), &rt, &st), 0);
    assert_int_equal(st.available, 0);
    assert_non_null(strstr(st.reason, "libnvjpeg.so.12"));
    assert_non_null(strstr(st.reason, "lacks nvjpegDecodeBatched"));
    assert_non_null(strstr(st.reason, DIR("missing")));
    assert_null(rt.cudart); /* nothing left loaded */
    assert_null(rt.nvjpeg);
}

static void test_no_device(void **state)
{
    (void)state;
    sl__gpu_rt_t rt;
    sl__gpu_status_t st;
    assert_int_equal(sl__gpu_rt_load(DIR("nodev"), &rt, &st), 0);
    assert_int_equal(st.available, 0);
    assert_string_equal(st.reason, "no CUDA device (cudaGetDeviceCount: "
                                   "no CUDA-capable device is detected)");
}

/* Loading makes no nvJPEG handle: one is made on the calling thread's
 * device, which a process-wide probe does not know (GPU 0 in every rank
 * unless the trainer set one); the stage learns the backend on its own
 * GPU (test_gpu_cuda_sim). So a GPU without the hardware backend loads
 * as any other. */
static void test_load_makes_no_nvjpeg_handle(void **state)
{
    (void)state;
    sl__gpu_rt_t rt;
    sl__gpu_status_t st;
    assert_int_equal(sl__gpu_rt_load(DIR("nohw"), &rt, &st), 1);
    assert_int_equal(st.available, 1);
    assert_int_equal(st.device_count, 1);
    assert_string_equal(st.reason, "");
    assert_non_null(strstr(st.cudart, DIR("nohw") "/libcudart.so.12"));
    int (*handles)(void) =
        (int (*)(void))(uintptr_t)dlsym(rt.nvjpeg, "fake_nvjpeg_handles");
    assert_non_null(handles);
    assert_int_equal(handles(), 0);
    int v = 0;
    assert_int_equal(rt.runtime_version(&v), 0);
    assert_int_equal(v, 12040);
    sl__gpu_rt_unload(&rt);
    assert_null(rt.cudart);
}

static void test_available_without_optional_entries(void **state)
{
    (void)state;
    sl__gpu_rt_t rt;
    sl__gpu_status_t st;
    assert_int_equal(sl__gpu_rt_load(DIR("ok"), &rt, &st), 1);
    assert_string_equal(st.reason, "");
    assert_non_null(rt.nvjpeg_decode_batched);
    /* The ROI decode's entries are optional: this nvJPEG lacks them (as
     * those before 11.6 do) and is used all the same, without ROI. */
    assert_null(rt.nvjpeg_decode_batched_ex);
    assert_int_equal(sl__gpu_rt_roi(&rt), 0);
    /* So are the hardware backend's per-image check and preallocation
     * (nvjpegDecodeBatchedSupportedEx, nvjpegJpegStream*,
     * nvjpegDecodeBatchedPreAllocate): the stage goes without them. */
    assert_null(rt.nvjpeg_batched_supported_ex);
    assert_null(rt.nvjpeg_stream_parse_header);
    assert_null(rt.nvjpeg_batched_prealloc);
    assert_int_equal(sl__gpu_rt_hw_check(&rt), 0);
    sl__gpu_rt_unload(&rt);
}

/* CUDA 13's pair found under a driver too old for it (PyTorch's cu13
 * wheels beside a CUDA 12 driver): unloaded, and CUDA 12's used; where
 * there is none, both reasons. */
static void test_old_driver_falls_back_to_cuda_12(void **state)
{
    (void)state;
    sl__gpu_rt_t rt;
    sl__gpu_status_t st;
    assert_int_equal(sl__gpu_rt_load(DIR("olddrv") ":" DIR("ok"), &rt, &st), 1);
    assert_string_equal(st.reason, "");
    assert_non_null(strstr(st.cudart, DIR("ok") "/libcudart.so.12"));
    assert_non_null(strstr(st.nvjpeg, DIR("ok") "/libnvjpeg.so.12"));
    assert_int_equal(st.device_count, 1);
    sl__gpu_rt_unload(&rt);
    assert_int_equal(sl__gpu_rt_load(DIR("olddrv"), &rt, &st), 0);
    assert_null(rt.cudart);
    assert_non_null(strstr(st.reason,
                           "CUDA 13: no CUDA device (cudaGetDeviceCount: CUDA "
                           "driver version is insufficient for CUDA runtime "
                           "version); then CUDA 12: no libcudart.so.12 found "
                           "in " DIR("olddrv")));
    assert_int_equal(st.device_count, 0);
}

static void test_env_path_is_the_only_search(void **state)
{
    (void)state;
    sl__gpu_rt_t rt;
    sl__gpu_status_t st;
    setenv("SL_CUDA_LIB_PATH", DIR("empty"), 1);
    assert_int_equal(sl__gpu_rt_load(NULL, &rt, &st), 0);
    assert_non_null(strstr(st.reason, DIR("empty")));
    assert_non_null(strstr(st.reason, "SL_CUDA_LIB_PATH"));
    setenv("SL_CUDA_LIB_PATH", DIR("ok"), 1);
    assert_int_equal(sl__gpu_rt_load(NULL, &rt, &st), 1);
    sl__gpu_rt_unload(&rt);
    unsetenv("SL_CUDA_LIB_PATH");
}

/* The Python package's folders (SL_PYTHON_SITE) come first in the
 * default search, each with the wheels' three folders; a pyenv or conda
 * Python's wheels are found there. */
static void test_the_python_folders_are_searched_first(void **state)
{
    (void)state;
    char *site = tu_tmpdir("gpu_rt_site"), dirs[16384], want[1024];
    setenv("SL_PYTHON_SITE", "/a:/b/c", 1);
    unsetenv("VIRTUAL_ENV");
    sl__gpu_rt_default_dirs(dirs, sizeof dirs);
    assert_non_null(strstr(dirs, "/a/nvidia/cuda_runtime/lib:"
                                 "/a/nvidia/nvjpeg/lib:/a/nvidia/cu13/lib:"
                                 "/b/c/nvidia/cuda_runtime/lib:"));
    assert_true(strncmp(dirs, "/a/nvidia/cuda_runtime/lib:", 27) == 0);
    assert_non_null(strstr(dirs, "/usr/local/lib/python3.12/site-packages/"
                                 "nvidia/cu13/lib"));
    /* CUDA 12's wheels' layout in a folder of their own */
    const char *sub[2][2] = {{"nvidia/cuda_runtime/lib", "libcudart.so.12"},
                             {"nvidia/nvjpeg/lib", "libnvjpeg.so.12"}};
    for (int i = 0; i < 2; i++) {
        snprintf(want, sizeof want,
                 "mkdir -p '%s/%s' && ln -sf '%s/%s' "
                 "'%s/%s/%s'",
                 site, sub[i][0], DIR("ok"), sub[i][1], site, sub[i][0],
                 sub[i][1]);
        assert_int_equal(system(want), 0);
    }
    setenv("SL_PYTHON_SITE", site, 1);
    sl__gpu_rt_default_dirs(dirs, sizeof dirs);
    sl__gpu_rt_t rt;
    sl__gpu_status_t st;
    assert_int_equal(sl__gpu_rt_load(dirs, &rt, &st), 1);
    snprintf(want, sizeof want, "%s/nvidia/nvjpeg/lib/libnvjpeg.so.12", site);
    assert_string_equal(st.nvjpeg, want);
    sl__gpu_rt_unload(&rt);
    unsetenv("SL_PYTHON_SITE");
    free(site);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_library_names_the_folders),
        cmocka_unit_test(test_missing_symbol_is_named),
        cmocka_unit_test(test_no_device),
        cmocka_unit_test(test_load_makes_no_nvjpeg_handle),
        cmocka_unit_test(test_available_without_optional_entries),
        cmocka_unit_test(test_old_driver_falls_back_to_cuda_12),
        cmocka_unit_test(test_env_path_is_the_only_search),
        cmocka_unit_test(test_the_python_folders_are_searched_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
