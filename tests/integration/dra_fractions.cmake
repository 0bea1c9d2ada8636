# Shares of a GPU by memory through DRA (issue 30): `gpuslice dra-plugin` with kubelet-sim,
# fake_apiserver.py and fake-mps.
if(TARGET gpuslice AND TARGET fake_nvml AND TARGET kubelet-sim AND EXISTS /usr/bin/python3)
    add_test(NAME test_dra_fractions
        COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_dra_fractions.py -v)
    set_tests_properties(test_dra_fractions PROPERTIES TIMEOUT 300
        ENVIRONMENT "GS_SOURCE_DIR=${CMAKE_SOURCE_DIR};GS_BINARY_DIR=${CMAKE_BINARY_DIR}")
endif()
