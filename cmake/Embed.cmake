# A file compiled into the library as a byte array: <NAME>_bytes (16-byte
# aligned) and <NAME>_len. Used for the default RL policy
# (cmake/EmbedPolicy.cmake) and the GPU kernels' fatbin
# (cmake/GpuKernels.cmake). Included for sl_embed_write, or run as a script:
#   cmake -DIN=file -DOUT=file.c -DNAME=sym -DWHAT=text -P Embed.cmake
function(sl_embed_write in out name what)
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
    "/* Generated from ${what} by cmake/Embed.cmake. */\n"
    "#include <stddef.h>\n"
    "_Alignas(16) const unsigned char ${name}_bytes[] = {\n${body}\n};\n"
    "const size_t ${name}_len = ${n};\n")
  configure_file(${out}.tmp ${out} COPYONLY)
  file(REMOVE ${out}.tmp)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  sl_embed_write(${IN} ${OUT} ${NAME} ${WHAT})
endif()
