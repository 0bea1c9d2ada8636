# Fractions of a GPU through DRA (issue 30), through fake_apiserver.py and kubelet-sim:
# `gpuslice dra-plugin --config-file examples/dra/fractions/config.yaml` publishes GPUs
# shareable by memory (test_dra_fractions_publish), and shares of a GPU are prepared with
# fake-mps (test_dra_fractions).
if(TARGET gpuslice AND TARGET fake_nvml AND TARGET kubelet-sim AND EXISTS /usr/bin/python3)
    add_test(NAME test_dra_fractions_publish
        COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_dra_fractions_publish.py -v)
    set_tests_properties(test_dra_fractions_publish PROPERTIES TIMEOUT 120
        ENVIRONMENT "GS_SOURCE_DIR=${CMAKE_SOURCE_DIR};GS_BINARY_DIR=${CMAKE_BINARY_DIR}")
    add_test(NAME test_dra_fractions
        COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_dra_fractions.py -v)
    set_tests_properties(test_dra_fractions PROPERTIES TIMEOUT 300
        ENVIRONMENT "GS_SOURCE_DIR=${CMAKE_SOURCE_DIR};GS_BINARY_DIR=${CMAKE_BINARY_DIR}")
endif()
