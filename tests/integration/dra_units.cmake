# `gpuslice dra-plugin` runs the DRA units only: the device plugins' folder left alone
# (issue 29 §2), on the fake NVML, kubelet-sim's DRA side and fake_apiserver.py.
if(TARGET gpuslice AND TARGET fake_nvml AND TARGET kubelet-sim AND EXISTS /usr/bin/python3)
    add_test(NAME test_dra_units
        COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_dra_units.py -v)
    set_tests_properties(test_dra_units PROPERTIES TIMEOUT 120
        ENVIRONMENT "GS_SOURCE_DIR=${CMAKE_SOURCE_DIR};GS_BINARY_DIR=${CMAKE_BINARY_DIR}")
endif()
