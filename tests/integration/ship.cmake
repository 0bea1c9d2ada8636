# Issue 9 (ship): NVIDIA's chart with only the image swapped (test_nvidia_chart), our
# kustomize manifests and admission policy rendered and checked (test_manifests), and the
# image rootfs run under chroot (test_image_rootfs; skipped with the reason when it cannot
# be built here).
if(GS_PYTHON_GRPC AND TARGET gpuslice AND TARGET fake_nvml AND TARGET kubelet-sim AND TARGET gs_kube)
    add_test(NAME test_nvidia_chart
        COMMAND ${GS_PYTHON_GRPC} ${CMAKE_CURRENT_SOURCE_DIR}/test_nvidia_chart.py
                ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
    set_tests_properties(test_nvidia_chart PROPERTIES TIMEOUT 300
        ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1")
endif()
if(TARGET gpuslice)
    # kubectl missing: the test reports itself skipped with the reason
    add_test(NAME test_manifests
        COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/deploy/test_manifests.py
                ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
    set_tests_properties(test_manifests PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
if(TARGET gpuslice AND TARGET fake_nvml AND TARGET kubelet-sim)
    # root + apt needed (chroot, apt-get download): otherwise exit 77, reported as skipped
    add_test(NAME test_image_rootfs
        COMMAND ${CMAKE_SOURCE_DIR}/tests/deploy/test_image_rootfs.sh ${CMAKE_SOURCE_DIR}
                ${CMAKE_BINARY_DIR})
    set_tests_properties(test_image_rootfs PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77
        ENVIRONMENT "GS_SANITIZE_BUILD=${GS_SANITIZE}")
endif()
