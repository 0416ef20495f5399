# Optional components of libsluice, each ON by default where its libraries
# are found, so that an images-only user needs none of them:
#   SL_TEXT        the tokenizers (BPE: PCRE2; WordPiece: utf8proc)
#   SL_PROMETHEUS  the metrics endpoint (sl_options_t.metrics_port: libmicrohttpd)
#   SL_URING       asynchronous reads (sl_options_t.io_depth: liburing); off,
#                  the loader keeps one blocking read per read thread
#   SL_NIFTI       NIfTI-1/-2 volumes (sluice/volume.h: Debian's NIfTI C
#                  library, libnifti2-dev, found by header and library, not
#                  by its CMake package, whose paths are wrong; zlib)
#   SL_TFRECORD    TFRecord files' tf.train.Example (protobuf-c, protoc-c)
#   SL_CURL        remote sources: http://, https://, s3:// (libcurl; libxml2
#                  for S3 listings); off, a URL is refused with "built
#                  without libcurl" and the remote tests skip
# Off, a component's sources are not compiled and a stub under src/*/off/
# takes their place: the public API and the exported symbols stay the same
# in every build (a caller links against any libsluice.so.N), and a call that
# needs the missing part fails with SL_EUNSUPPORTED and a message that says
# "sluice was built without ...". sluice/version.h says what was built
# (SL_HAVE_TEXT, SL_HAVE_PROMETHEUS, ... one per component). jansson is not optional: the text
# sources and the simulator's profiles (src/sim/profile.c) read JSON.

# sl_component(VAR DOC MODULES...): option VAR, ON by default when every
# pkg-config module is found; ON with one missing is an error. Defines the
# imported targets PkgConfig::<VAR>_<i> and appends to SL_DEPS and SL_PKGS.
function(sl_component var doc)
  set(found ON)
  if(NOT DEFINED ${var} OR ${var})
    set(i 0)
    foreach(m ${ARGN})
      pkg_check_modules(${var}_${i} QUIET IMPORTED_TARGET ${m})
      if(NOT ${var}_${i}_FOUND)
        set(found OFF)
        list(APPEND missing ${m})
      endif()
      math(EXPR i "${i} + 1")
    endforeach()
  endif()
  option(${var} "${doc}" ${found})
  if(${var} AND NOT found)
    message(FATAL_ERROR "sluice: ${var}=ON needs pkg-config modules: ${missing} "
      "(scripts/install-deps installs them), or configure with -D${var}=OFF")
  endif()
  if(${var})
    set(i 0)
    foreach(m ${ARGN})
      list(APPEND SL_DEPS PkgConfig::${var}_${i})
      list(APPEND SL_PKGS ${var}_${i}=${m})
      math(EXPR i "${i} + 1")
    endforeach()
    set(SL_DEPS ${SL_DEPS} PARENT_SCOPE)
    set(SL_PKGS ${SL_PKGS} PARENT_SCOPE)
    string(REPLACE "SL_" "SL_HAVE_" have ${var})
    set(${have} 1 PARENT_SCOPE)
  else()
    string(REPLACE "SL_" "SL_HAVE_" have ${var})
    set(${have} 0 PARENT_SCOPE)
  endif()
endfunction()

sl_component(SL_TEXT "Text tokenizers (needs PCRE2 and utf8proc)" libpcre2-8 libutf8proc)
sl_component(SL_PROMETHEUS "Prometheus metrics endpoint (needs libmicrohttpd)" libmicrohttpd)

# SL_NIFTI: the NIfTI library has no pkg-config module, and Debian's CMake
# package of it (NIFTIConfig.cmake) names library paths that do not exist
# (/usr/lib/libznz.so.3.0.0), so it is found by its header and libraries
# and linked by name (-lnifti2 -lznz, as sluice.pc's Libs.private says);
# zlib is a pkg-config module as above. SL_NIFTI_INCLUDE_DIR is what
# nifti.c includes from.
if(NOT DEFINED SL_NIFTI OR SL_NIFTI)
  find_path(SL_NIFTI_INCLUDE_DIR nifti2_io.h PATH_SUFFIXES nifti)
  find_library(SL_NIFTI2_LIBRARY nifti2)
  find_library(SL_ZNZ_LIBRARY znz)
endif()
if(SL_NIFTI_INCLUDE_DIR AND SL_NIFTI2_LIBRARY AND SL_ZNZ_LIBRARY)
  sl_component(SL_NIFTI "NIfTI-1/-2 volumes (needs libnifti2-dev and zlib)" zlib)
else()
  if(SL_NIFTI)
    message(FATAL_ERROR "sluice: SL_NIFTI=ON needs the NIfTI C library "
      "(nifti2_io.h, libnifti2, libznz: libnifti2-dev; scripts/install-deps "
      "installs it), or configure with -DSL_NIFTI=OFF")
  endif()
  option(SL_NIFTI "NIfTI-1/-2 volumes (needs libnifti2-dev and zlib)" OFF)
  set(SL_HAVE_NIFTI 0)
endif()
if(SL_NIFTI)
  list(APPEND SL_DEPS nifti2 znz)
endif()
# TFRecord files need protobuf-c's library and its compiler, protoc-c (a
# program, not a pkg-config module: without it the default is OFF).
find_program(SL_PROTOC_C protoc-c)
if(NOT SL_PROTOC_C AND NOT DEFINED SL_TFRECORD)
  set(SL_TFRECORD OFF)
endif()
sl_component(SL_TFRECORD "TFRecord files: tf.train.Example (needs protobuf-c and protoc-c)" libprotobuf-c)
if(SL_TFRECORD AND NOT SL_PROTOC_C)
  message(FATAL_ERROR "sluice: SL_TFRECORD=ON needs protoc-c (protobuf-c-compiler; "
    "scripts/install-deps installs it), or configure with -DSL_TFRECORD=OFF")
endif()
sl_component(SL_URING "Asynchronous reads through io_uring (needs liburing)" liburing)
sl_component(SL_CURL "Remote sources: http(s):// and s3:// (needs libcurl and libxml2)" libcurl libxml-2.0)
message(STATUS "sluice: components: text=${SL_TEXT} prometheus=${SL_PROMETHEUS} nifti=${SL_NIFTI} tfrecord=${SL_TFRECORD} uring=${SL_URING} curl=${SL_CURL}")

# Sources that need a component's libraries, relative to src/, and the stub
# that replaces them when it is off. A new file that includes pcre2.h,
# utf8proc.h, microhttpd.h, nifti2_io.h, zlib.h, protobuf-c.h, liburing.h,
# curl.h or libxml2's headers belongs in these lists.
set(SL_TEXT_SOURCES text/bert_basic.c text/bpe.c text/bpe_gpt2.c text/bpe_map.c
    text/bpe_load.c text/bpe_merge.c text/bpe_pattern.c text/wordpiece.c
    text/wp_unicode.c)
set(SL_TEXT_STUB text/off/tok_off.c)
set(SL_PROMETHEUS_SOURCES telemetry/prom.c)
set(SL_PROMETHEUS_STUB telemetry/off/prom_off.c)
set(SL_URING_SOURCES exec/uring.c)
set(SL_URING_STUB exec/off/uring_off.c)
set(SL_NIFTI_SOURCES volume/nifti.c volume/gzindex.c)
set(SL_NIFTI_STUB volume/off/nifti_off.c)
set(SL_TFRECORD_SOURCES data/tf_example.c)
set(SL_TFRECORD_STUB data/off/tf_example_off.c)
set(SL_CURL_SOURCES data/remote.c data/remote_multi.c data/s3.c)
set(SL_CURL_STUB data/off/remote_off.c)

# sl_select_component_sources(LIST): removes from LIST the sources of every
# component that is off and adds its stub.
function(sl_select_component_sources list)
  set(srcs ${${list}})
  foreach(c TEXT PROMETHEUS NIFTI TFRECORD URING CURL)
    if(NOT SL_${c})
      foreach(f ${SL_${c}_SOURCES})
        list(REMOVE_ITEM srcs ${PROJECT_SOURCE_DIR}/src/${f})
      endforeach()
      list(APPEND srcs ${PROJECT_SOURCE_DIR}/src/${SL_${c}_STUB})
    endif()
  endforeach()
  set(${list} ${srcs} PARENT_SCOPE)
endfunction()
