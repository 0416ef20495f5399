# The default RL policy, policies/default.bin, compiled into the library as
# a byte array (sl__rl_default_bytes, src/sched/rl_file.c), so that
# `--policy rl` needs no file next to the binary. Sets SL_POLICY_C, the
# generated source. A tree without the file builds a library whose rl
# policy asks for a policy file.
#
# Included from the top CMakeLists.txt; also run as a script
# (cmake -DIN=... -DOUT=... -P EmbedPolicy.cmake) to regenerate the array
# when default.bin changes.
function(sl_embed_write in out)
  if(EXISTS ${in})
    file(READ ${in} hex HEX)
    string(LENGTH "${hex}" n)
    math(EXPR n "${n} / 2")
    string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
    string(REGEX REPLACE "((0x..,){16})" "\\1\n" body "${body}")
  else()
    set(n 0)
    set(body "0")
  endif()
  file(WRITE ${out}.tmp
    "/* Generated from policies/default.bin by cmake/EmbedPolicy.cmake. */\n"
    "#include <stddef.h>\n"
    "const unsigned char sl__rl_default_bytes[] = {\n${body}\n};\n"
    "const size_t sl__rl_default_len = ${n};\n")
  configure_file(${out}.tmp ${out} COPYONLY)
  file(REMOVE ${out}.tmp)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE)
  sl_embed_write(${IN} ${OUT})
  return()
endif()

set(SL_POLICY_BIN ${CMAKE_CURRENT_SOURCE_DIR}/policies/default.bin)
set(SL_POLICY_C ${CMAKE_BINARY_DIR}/generated/policy_default.c)
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/generated)
if(EXISTS ${SL_POLICY_BIN})
  add_custom_command(OUTPUT ${SL_POLICY_C}
    COMMAND ${CMAKE_COMMAND} -DIN=${SL_POLICY_BIN} -DOUT=${SL_POLICY_C}
            -P ${CMAKE_CURRENT_LIST_FILE}
    DEPENDS ${SL_POLICY_BIN} ${CMAKE_CURRENT_LIST_FILE}
    COMMENT "Embedding policies/default.bin")
else()
  sl_embed_write(${SL_POLICY_BIN} ${SL_POLICY_C})
  # Re-configure once the file appears.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
               ${CMAKE_CURRENT_SOURCE_DIR}/policies)
endif()
