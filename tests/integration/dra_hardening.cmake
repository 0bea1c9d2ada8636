# Issue 29's DRA hardening end to end: the Event poster's retries against fake_apiserver.py
# failing POSTs (through kube_event_probe), MIG claims on a host without /dev/nvidia-caps, and
# a claim whose opaque config C cannot take as written, through `gpuslice dra-plugin`.
add_executable(kube_event_probe ${CMAKE_SOURCE_DIR}/tests/unit/kube/kube_event_probe.c)
target_link_libraries(kube_event_probe PRIVATE gs_kube gs_base PkgConfig::JANSSON)
if(TARGET gpuslice AND TARGET fake_nvml AND TARGET kubelet-sim AND EXISTS /usr/bin/python3)
    add_test(NAME test_dra_hardening
        COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_dra_hardening.py -v)
    set_tests_properties(test_dra_hardening PROPERTIES TIMEOUT 300
        ENVIRONMENT "GS_SOURCE_DIR=${CMAKE_SOURCE_DIR};GS_BINARY_DIR=${CMAKE_BINARY_DIR};GS_KUBE_EVENT_PROBE=$<TARGET_FILE:kube_event_probe>;ASAN_OPTIONS=detect_leaks=1")
endif()
