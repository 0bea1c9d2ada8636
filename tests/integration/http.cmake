# The /metrics, /healthz, /readyz endpoint under idle and slowloris connections (issue 19).
if(TARGET kubelet-sim AND TARGET gpuslice AND TARGET fake_nvml)
    add_test(NAME test_metrics_http
        COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_metrics_http.py ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
    set_tests_properties(test_metrics_http PROPERTIES TIMEOUT 300
        ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1")
endif()
