# /metrics: GPU telemetry and per-pod attribution (daemon, kubelet-sim, fake NVML).
if(TARGET kubelet-sim AND TARGET gpuslice AND TARGET fake_nvml)
    add_test(NAME test_metrics_pods
        COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_metrics_pods.py ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
    set_tests_properties(test_metrics_pods PROPERTIES TIMEOUT 300
        ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1")
endif()
