# CDI spec generation with the cdi-* device list strategies (daemon + kubelet-sim).
if(TARGET gpuslice AND TARGET fake_nvml AND TARGET kubelet-sim)
    add_test(NAME test_cdi_daemon
        COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_cdi.py ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
    set_tests_properties(test_cdi_daemon PROPERTIES TIMEOUT 300)
endif()
