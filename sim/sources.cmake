# The InvisiFlow simulation binary (invisiflow-sim, docs/invisiflow.md), included by
# sim/CMakeLists.txt: it links dta_sim (the collector application and the C ABI).
set(IFSIM_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/src/invisiflow_sim.cc
  ${CMAKE_CURRENT_LIST_DIR}/src/fabric.cc
  ${CMAKE_CURRENT_LIST_DIR}/src/switch_agent.cc
  ${CMAKE_CURRENT_LIST_DIR}/src/dta_bridge.cc
)
add_executable(invisiflow-sim ${IFSIM_SOURCES})
target_link_libraries(invisiflow-sim PRIVATE dta_sim)
