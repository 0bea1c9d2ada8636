# gpuslice labels / feature-discovery against expected label files and the fake API server.
if(TARGET gpuslice AND TARGET fake_nvml)
    add_test(NAME test_labels_cli
        COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_labels.py
                $<TARGET_FILE:gpuslice> $<TARGET_SONAME_FILE:fake_nvml> ${CMAKE_SOURCE_DIR} -v)
    set_tests_properties(test_labels_cli PROPERTIES TIMEOUT 300)
endif()
