# Sources of the InvisiFlow simulation binary (invisiflow-sim), included by sim/CMakeLists.txt.
set(IFSIM_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/src/invisiflow_sim.cc
  ${CMAKE_CURRENT_LIST_DIR}/src/fabric.cc
  ${CMAKE_CURRENT_LIST_DIR}/src/switch_agent.cc
  ${CMAKE_CURRENT_LIST_DIR}/src/dta_bridge.cc
)
