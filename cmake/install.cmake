# What `cmake --install` puts where, and so the Debian package (debian/rules): the daemon as a
# system program (section 8), the CLI, their man pages, the dashboards and rules, the docs.
#
# The man pages are generated from each program's own --help by help2man, so they say what the
# build does: a flag added to the daemon is in iouscoped(8) at the next build, and
# tests/package/run checks that every flag --help names is in the page. Without help2man (a
# developer's machine that never packages) they are left out; IOUSCOPE_MAN=ON makes it an error.
include(GNUInstallDirs)

install(TARGETS iouscoped RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR})
install(TARGETS iouscope RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

find_program(IOUSCOPE_HELP2MAN help2man)
option(IOUSCOPE_MAN "Generate and install the man pages (needs help2man)" OFF)
if(IOUSCOPE_MAN AND NOT IOUSCOPE_HELP2MAN)
  message(FATAL_ERROR "IOUSCOPE_MAN=ON needs help2man (apt install help2man)")
endif()
if(IOUSCOPE_HELP2MAN)
  set(_man ${CMAKE_BINARY_DIR}/man)
  # --version-string: the programs' --version prints the kernel and, as root, loads every probe;
  # a man page wants the version alone, which is the project's.
  add_custom_command(OUTPUT ${_man}/iouscoped.8
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_man}
    COMMAND ${IOUSCOPE_HELP2MAN} --no-info --section=8 --version-string=${PROJECT_VERSION}
      --name=io_uring\ SQ\ thread\ and\ ring\ metrics\ for\ Prometheus
      --output=${_man}/iouscoped.8 $<TARGET_FILE:iouscoped>
    DEPENDS iouscoped VERBATIM)
  # The CLI's top-level --help only lists its subcommands: theirs go in as sections.
  add_custom_command(OUTPUT ${_man}/iouscope.1
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_man}
    COMMAND ${CMAKE_COMMAND} -DCLI=$<TARGET_FILE:iouscope> -DOUT=${_man}/iouscope.h2m
      -P ${CMAKE_SOURCE_DIR}/cmake/man_subcommands.cmake
    COMMAND ${IOUSCOPE_HELP2MAN} --no-info --section=1 --version-string=${PROJECT_VERSION}
      --name=top-like\ view\ and\ tuning\ advice\ for\ io_uring\ SQ\ threads
      --include=${_man}/iouscope.h2m --output=${_man}/iouscope.1 $<TARGET_FILE:iouscope>
    DEPENDS iouscope ${CMAKE_SOURCE_DIR}/cmake/man_subcommands.cmake VERBATIM)
  if(IOUSCOPE_MAN)
    add_custom_target(iouscope_man ALL DEPENDS ${_man}/iouscoped.8 ${_man}/iouscope.1)
    install(FILES ${_man}/iouscoped.8 DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
    install(FILES ${_man}/iouscope.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  else()
    add_custom_target(iouscope_man DEPENDS ${_man}/iouscoped.8 ${_man}/iouscope.1)
  endif()
endif()

install(DIRECTORY dashboards/grafana dashboards/prometheus
  DESTINATION ${CMAKE_INSTALL_DATADIR}/iouscope
  PATTERN tests EXCLUDE)
install(FILES README.md CHANGELOG.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} FILES_MATCHING PATTERN *.md
  PATTERN images EXCLUDE)
