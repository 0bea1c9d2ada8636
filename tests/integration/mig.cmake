# gpuslice mig (nvidia-mig-parted) against the fake NVML.
if(TARGET gpuslice AND TARGET fake_nvml)
    add_test(NAME test_mig_cli
        COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_mig.py ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
    set_tests_properties(test_mig_cli PROPERTIES TIMEOUT 600)
endif()
if(TARGET kubelet-sim AND TARGET gpuslice AND TARGET fake_nvml)
    add_test(NAME test_mig_daemon
        COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_mig_daemon.py ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
    set_tests_properties(test_mig_daemon PROPERTIES TIMEOUT 300)
endif()
