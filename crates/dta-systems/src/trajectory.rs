//! Trajectory Sampling ([DTA Table 2]: packet labels of every hop of sampled packets, Postcarding).
