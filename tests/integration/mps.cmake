# MPS: control daemons supervised by the agent and mps-control-daemon (fake NVML, fake MPS).
if(TARGET kubelet-sim AND TARGET gpuslice AND TARGET fake_nvml AND TARGET fake_mps)
    add_test(NAME test_mps
        COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_mps.py ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
    set_tests_properties(test_mps PROPERTIES TIMEOUT 300
        ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1;GS_SANITIZE_BUILD=${GS_SANITIZE}")
endif()

# mps-control-daemon on its own (NVIDIA's split): restart, wedge, SIGHUP, cleanup.
if(TARGET gpuslice AND TARGET fake_nvml AND TARGET fake_mps)
    add_test(NAME test_mps_control_daemon
        COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_mps_control_daemon.py
                $<TARGET_FILE:gpuslice> $<TARGET_SONAME_FILE:fake_nvml> $<TARGET_FILE:fake_mps> -v)
    set_tests_properties(test_mps_control_daemon PROPERTIES TIMEOUT 300
        ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1")
endif()
