# DRA, the kubelet's side (issue 22): src/kubelet's DRA plugin server with canned ops
# (dra_stub) driven by kubelet-sim (registration in v1 and v1beta1, prepare, unprepare,
# failures, plugin restart) and by Python grpcio as an independent peer.
add_executable(dra_stub dra_stub.c)
target_link_libraries(dra_stub PRIVATE gs_kdra gs_base)
if(TARGET kubelet-sim AND EXISTS /usr/bin/python3)
    add_test(NAME test_dra_kubelet
        COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_dra_kubelet.py -v)
    set_tests_properties(test_dra_kubelet PROPERTIES TIMEOUT 300
        ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1;GS_DRA_STUB=$<TARGET_FILE:dra_stub>;GS_KUBELET_SIM=$<TARGET_FILE:kubelet-sim>")
endif()
