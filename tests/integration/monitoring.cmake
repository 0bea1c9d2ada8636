# Issue 20 §2: the monitoring component (deployments/kustomize/components/monitoring), its
# alert rules through promtool, and /metrics through `promtool check metrics`. Without
# promtool (Debian's prometheus package, scripts/install-deps) or kubectl the parts that
# need them report themselves skipped.
if(TARGET kubelet-sim AND TARGET gpuslice AND TARGET fake_nvml)
    add_test(NAME test_monitoring
        COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_monitoring.py
                ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
    set_tests_properties(test_monitoring PROPERTIES TIMEOUT 300
        ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1")
endif()
