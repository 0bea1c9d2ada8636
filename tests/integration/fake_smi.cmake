# The stand-in nvidia-smi (tools/fake-nvidia-smi): NVIDIA's DRA time-slicing calls, state,
# log, refusals and the failure switch.
if(TARGET fake_nvidia_smi)
    add_test(NAME test_fake_nvidia_smi
        COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_fake_nvidia_smi.py
                $<TARGET_FILE:fake_nvidia_smi> -v)
    set_tests_properties(test_fake_nvidia_smi PROPERTIES TIMEOUT 60)
endif()
