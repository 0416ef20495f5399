# Installs libsluice for C users: the shared and static libraries, the
# generated sluice/version.h, sluice.pc and a CMake package:
#   find_package(sluice 0.1 REQUIRED)
#   target_link_libraries(app PRIVATE sluice::sluice)         # shared
#   find_package(sluice REQUIRED COMPONENTS static)           # also
#   target_link_libraries(app PRIVATE sluice::sluice_static)  # static
# The static library needs its dependencies' pkg-config modules; the config
# file loads sluice::sluice_static only where they are found. Both the
# package and sluice.pc are relocatable (paths relative to where they lie).
# Expects SL_PKGS (TARGET=module pairs), SL_HAVE_* and GNUInstallDirs.
include(CMakePackageConfigHelpers)

set(SL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/sluice)
install(TARGETS sluice_shared EXPORT sluiceTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS sluice_static EXPORT sluiceStaticTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT sluiceTargets NAMESPACE sluice:: DESTINATION ${SL_CMAKE_DIR})
install(EXPORT sluiceStaticTargets NAMESPACE sluice:: DESTINATION ${SL_CMAKE_DIR})
install(FILES ${SL_GEN_INCLUDE}/sluice/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sluice)

configure_package_config_file(cmake/sluiceConfig.cmake.in
  ${CMAKE_BINARY_DIR}/sluiceConfig.cmake INSTALL_DESTINATION ${SL_CMAKE_DIR})
# 0.x: a minor release may break the API (SameMinorVersion); from 1.0 on,
# SameMajorVersion is the rule to switch to.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/sluiceConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/sluiceConfig.cmake
              ${CMAKE_BINARY_DIR}/sluiceConfigVersion.cmake
        DESTINATION ${SL_CMAKE_DIR})

# sluice.pc: Requires.private = the pkg-config modules this build links
# (they differ with SL_TEXT / SL_PROMETHEUS); Libs.private = the rest of
# what a static link needs.
set(SL_PC_REQUIRES_PRIVATE)
foreach(p ${SL_PKGS})
  string(REGEX REPLACE "^[^=]*=" "" module ${p})
  list(APPEND SL_PC_REQUIRES_PRIVATE ${module})
endforeach()
string(REPLACE ";" " " SL_PC_REQUIRES_PRIVATE "${SL_PC_REQUIRES_PRIVATE}")
set(SL_PC_LIBS_PRIVATE "-lm -lpthread")
if(SL_NIFTI) # no pkg-config module of its own
  string(APPEND SL_PC_LIBS_PRIVATE " -lnifti2 -lznz")
endif()
foreach(l ${CMAKE_DL_LIBS})
  string(APPEND SL_PC_LIBS_PRIVATE " -l${l}")
endforeach()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(SL_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(SL_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(SL_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  # ${pcfiledir}: the folder sluice.pc lies in, so `cmake --install --prefix`
  # anywhere gives a working file.
  file(RELATIVE_PATH rel /r/${CMAKE_INSTALL_LIBDIR}/pkgconfig /r)
  string(REGEX REPLACE "/$" "" rel "${rel}")
  set(SL_PC_PREFIX "\${pcfiledir}/${rel}")
  set(SL_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(SL_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(sluice.pc.in ${CMAKE_BINARY_DIR}/sluice.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/sluice.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
