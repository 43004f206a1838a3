//! The CPU reference backend through the conformance suite every backend runs: against
//! brute force and the definitions (histograms, routing, gradients, quantisation, margins
//! against predictions), and against itself on several workers.

use sapwood_core::backend::CpuFactory;

sapwood_testkit::conformance!(factory: CpuFactory, small: CpuFactory);
