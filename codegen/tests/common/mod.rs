pub mod cell_plans;
