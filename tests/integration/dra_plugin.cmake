# `gpuslice dra-plugin` end to end (issue 22): the fake NVML, kubelet-sim's DRA side,
# fake_apiserver.py's resource.k8s.io, the stand-in nvidia-smi and fake-mps.
if(TARGET gpuslice AND TARGET fake_nvml AND TARGET kubelet-sim AND EXISTS /usr/bin/python3)
    add_test(NAME test_dra_plugin
        COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_dra_plugin.py -v)
    set_tests_properties(test_dra_plugin PROPERTIES TIMEOUT 300
        ENVIRONMENT "GS_SOURCE_DIR=${CMAKE_SOURCE_DIR};GS_BINARY_DIR=${CMAKE_BINARY_DIR}")
endif()
