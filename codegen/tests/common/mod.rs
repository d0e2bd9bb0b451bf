pub mod cell_plans;
pub mod row_plans;
