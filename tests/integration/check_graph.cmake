# scripts/check-graph's rules, each shown failing on a scratch tree that breaks it (issue 28).
if(EXISTS /usr/bin/python3)
    add_test(NAME test_check_graph
        COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_check_graph.py -v)
    set_tests_properties(test_check_graph PROPERTIES TIMEOUT 60
        ENVIRONMENT "GS_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endif()
