# src/kube's resource.k8s.io calls (issue 22) against fake_apiserver.py, driven through
# kube_dra_probe (tests/unit/kube/kube_dra_probe.c): version fallback and "DRA off", slices
# listed/created/updated/deleted with the API's validation and conflicts, claims, pod Events.
add_executable(kube_dra_probe ${CMAKE_SOURCE_DIR}/tests/unit/kube/kube_dra_probe.c)
target_link_libraries(kube_dra_probe PRIVATE gs_kube gs_base PkgConfig::JANSSON)
if(GS_PYTHON3)
    add_test(NAME test_kube_dra
        COMMAND ${GS_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/test_kube_dra.py -v
                $<TARGET_FILE:kube_dra_probe>)
    set_tests_properties(test_kube_dra PROPERTIES TIMEOUT 120
        ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1")
endif()
