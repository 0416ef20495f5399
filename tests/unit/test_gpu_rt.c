/* gpu/rt: the CUDA runtime and nvJPEG loaded at run time, tested with
 * stand-in libraries built in the test tree (tests/CMakeLists.txt,
 * fake_cuda/): no CUDA, no GPU needed. Each case names its status. */
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

static void test_hybrid_backend_is_a_note(void **state)
{
    (void)state;
    sl__gpu_rt_t rt;
    sl__gpu_status_t st;
    assert_int_equal(sl__gpu_rt_load(DIR("nohw"), &rt, &st), 1);
    assert_int_equal(st.available, 1);
    assert_int_equal(st.hw_backend, 0);
    assert_int_equal(st.device_count, 1);
    assert_non_null(strstr(st.reason, "lacks the hardware backend"));
    assert_non_null(strstr(st.cudart, DIR("nohw") "/libcudart.so.12"));
    int v = 0;
    assert_int_equal(rt.runtime_version(&v), 0);
    assert_int_equal(v, 12040);
    sl__gpu_rt_unload(&rt);
    assert_null(rt.cudart);
}

static void test_available_with_hardware_backend(void **state)
{
    (void)state;
    sl__gpu_rt_t rt;
    sl__gpu_status_t st;
    assert_int_equal(sl__gpu_rt_load(DIR("ok"), &rt, &st), 1);
    assert_int_equal(st.hw_backend, 1);
    assert_string_equal(st.reason, "");
    assert_non_null(rt.nvjpeg_decode_batched);
    /* The ROI decode's entries are optional: this nvJPEG lacks them (as
     * those before 11.6 do) and is used all the same, without ROI. */
    assert_null(rt.nvjpeg_decode_batched_ex);
    assert_int_equal(sl__gpu_rt_roi(&rt), 0);
    sl__gpu_rt_unload(&rt);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_library_names_the_folders),
        cmocka_unit_test(test_missing_symbol_is_named),
        cmocka_unit_test(test_no_device),
        cmocka_unit_test(test_hybrid_backend_is_a_note),
        cmocka_unit_test(test_available_with_hardware_backend),
        cmocka_unit_test(test_env_path_is_the_only_search),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
