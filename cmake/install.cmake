# Installation and the Debian package (included at the end of the top CMakeLists.txt, once every
# program is defined). `cmake --install build` puts, under the prefix (GNUInstallDirs):
#   bin/                     the programs a laboratory runs (not the benchmarks, not drths-attack),
#                            and drths-rehearse (tools/drths-rehearse), the rehearsal on localhost
#   lib/drths/               libdrths_comedi_emu.so, the emulated comedi board (docs/comedi.md)
#   share/drths/examples/    the example experiments and their records (examples/records)
#   share/drths/web/         the monitor's page, built (drths-monitor looks there when no web/
#                            is beside it)
#   share/doc/drths/         README.md and docs/
#   share/man/man1/          one page per program, generated from its --help by help2man
# `cpack -G DEB` in the build folder makes drths_<version>_<arch>.deb of the same files, which
# installs offline on a Debian 12 machine with `apt install ./drths_*.deb` (README.md).
include(GNUInstallDirs)

# The programs installed: the two sites and every tool a laboratory uses on a test day.
set(DRTHS_INSTALL_PROGRAMS drths-numerical drths-physical)
foreach(m ${tool_mains})
  get_filename_component(d ${m} DIRECTORY)
  get_filename_component(verb ${d} NAME)
  # Benchmarks measure this machine; drths-attack sends hostile datagrams for the fault tests.
  if(NOT verb MATCHES "^bench" AND NOT verb STREQUAL "attack")
    list(APPEND DRTHS_INSTALL_PROGRAMS drths-${verb})
  endif()
endforeach()
foreach(p ${DRTHS_INSTALL_PROGRAMS})
  if(TARGET ${p})
    install(TARGETS ${p} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()
# The rehearsal (a shell program; tools/rehearse runs the same file on the build folder) and the
# emulated comedi board it preloads with --daq comedi, in a folder of drths's own: it is loaded
# only by LD_PRELOAD, never by the dynamic linker's search.
install(PROGRAMS ${CMAKE_SOURCE_DIR}/tools/drths-rehearse DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS drths_comedi_emu LIBRARY DESTINATION lib/drths)

install(DIRECTORY ${CMAKE_SOURCE_DIR}/examples/ DESTINATION ${CMAKE_INSTALL_DATADIR}/drths/examples
  PATTERN ".git*" EXCLUDE)
install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)
install(FILES ${CMAKE_SOURCE_DIR}/protocol/PROTOCOL.md DESTINATION ${CMAKE_INSTALL_DOCDIR})

# Man pages: help2man runs each program's --help and --version at build time (target drths_man,
# part of `all` when help2man is installed), into <build>/man. Without help2man the build goes on
# and installs no page, with one line saying so.
find_program(HELP2MAN help2man)
# The NAME line of each page; a program not listed gets a generic one.
set(DRTHS_MAN_NAME_drths-numerical "numerical site of a real-time hybrid simulation")
set(DRTHS_MAN_NAME_drths-physical "actuator site of a real-time hybrid simulation")
set(DRTHS_MAN_NAME_drths-check "pre-flight check of an experiment file")
set(DRTHS_MAN_NAME_drths-conform "conformance suite for an implementation of the drths protocol")
set(DRTHS_MAN_NAME_drths-monitor "live monitor page of a hybrid run")
set(DRTHS_MAN_NAME_drths-report "compare a run with its reference and judge it")
set(DRTHS_MAN_NAME_drths-keygen "make or identify the pre-shared key of two sites")
set(DRTHS_MAN_NAME_drths-impair "UDP relay that impairs a link like netem")
set(DRTHS_MAN_NAME_drths-specimen "drive an MR-damper model with a prescribed displacement")
set(DRTHS_MAN_NAME_drths-tracking "actuator tracking study on the virtual plant")
set(DRTHS_MAN_NAME_drths-openfresco-client "OpenSees-like client of an OpenFresco site")
set(DRTHS_MAN_NAME_drths-rehearse "rehearse a hybrid test on this machine through an impaired link")
if(HELP2MAN)
  set(man_pages "")
  foreach(p ${DRTHS_INSTALL_PROGRAMS})
    if(TARGET ${p})
      set(page ${CMAKE_BINARY_DIR}/man/${p}.1)
      set(name "${DRTHS_MAN_NAME_${p}}")
      if(NOT name)
        set(name "a drths program")
      endif()
      # cmake/man-help gives help2man the --help whose usage block is in its synopsis format.
      add_custom_command(OUTPUT ${page}
        COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
        COMMAND ${CMAKE_COMMAND} -E env DRTHS_MAN_PROGRAM=$<TARGET_FILE:${p}>
                ${HELP2MAN} --no-info --no-discard-stderr --version-option=--version
                --name=${name} --section=1 --output=${page} ${CMAKE_SOURCE_DIR}/cmake/man-help
        DEPENDS ${p} ${CMAKE_SOURCE_DIR}/cmake/man-help
        COMMENT "man page ${p}.1"
        VERBATIM)
      list(APPEND man_pages ${page})
    endif()
  endforeach()
  # drths-rehearse is a script: its --version asks drths-numerical of the build folder.
  set(page ${CMAKE_BINARY_DIR}/man/drths-rehearse.1)
  add_custom_command(OUTPUT ${page}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
    COMMAND ${CMAKE_COMMAND} -E env DRTHS_REHEARSE_BIN=${CMAKE_BINARY_DIR}
            ${HELP2MAN} --no-info --no-discard-stderr --version-option=--version
            --name=${DRTHS_MAN_NAME_drths-rehearse} --section=1 --output=${page}
            ${CMAKE_SOURCE_DIR}/tools/drths-rehearse
    DEPENDS drths-numerical ${CMAKE_SOURCE_DIR}/tools/drths-rehearse
    COMMENT "man page drths-rehearse.1"
    VERBATIM)
  list(APPEND man_pages ${page})
  add_custom_target(drths_man ALL DEPENDS ${man_pages})
  install(FILES ${man_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
  message(STATUS "help2man not found: no man pages (tools/deps installs it)")
endif()

# The monitor's page, built (uPlot comes from the npm registry through web/package-lock.json;
# --page-only: not the browser tests' puppeteer-core, a devDependency):
# tools/web-build makes <build>/web at install time, so the package carries it and the lab PC
# never runs npm. A build folder that already has the page and no npm installs what it has.
install(CODE "
  message(STATUS \"Building the monitor's page (tools/web-build)\")
  execute_process(COMMAND ${CMAKE_COMMAND} -E env DRTHS_BUILD_DIR=${CMAKE_BINARY_DIR}
                          bash ${CMAKE_SOURCE_DIR}/tools/web-build --page-only RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 AND NOT EXISTS \"${CMAKE_BINARY_DIR}/web/index.html\")
    message(FATAL_ERROR \"tools/web-build failed: the monitor's page cannot be installed\")
  elseif(NOT rc EQUAL 0)
    message(WARNING \"tools/web-build failed: installing the page in ${CMAKE_BINARY_DIR}/web\")
  endif()")
install(DIRECTORY ${CMAKE_BINARY_DIR}/web/ DESTINATION ${CMAKE_INSTALL_DATADIR}/drths/web)

# The Debian package. Its dependencies are the Debian 12 runtime packages of the shared
# libraries the installed programs load (tests/integration/test_package.sh checks every one
# against the programs' NEEDED entries).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME drths)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "drths maintainers <drths@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "distributed real-time hybrid simulation for earthquake engineering laboratories")
set(CPACK_PACKAGE_DESCRIPTION
  "The numerical and actuator sites of a real-time hybrid simulation, the live monitor, the\
 report, the pre-flight check of an experiment file, examples, documentation and man pages.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
  "libc6 (>= 2.34), libuv1 (>= 1.44), libmsgpackc2 (>= 4.0), libsodium23 (>= 1.0.18),\
 libcyaml1 (>= 1.3), libcomedi0, liblapacke (>= 3.11), libmicrohttpd12 (>= 0.9.75),\
 libhdf5-103-1 (>= 1.10.8)")
# gnuplot draws drths-report's plots (without it the report says so and names the package);
# man-db reads the man pages. A minimal Debian 12 has neither; apt installs Recommends by default.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "gnuplot-nox, man-db")
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_FILE_NAME_SUFFIX "")
include(CPack)
