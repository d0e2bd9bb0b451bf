//! A column aggregate of `cbind(X, dX)` from the cached one of `X`: the aggregates of `dX`'s
//! columns appended (column aggregates reduce each column on its own).

use super::{cbind_of_two, dense_part, Operation, PartialRewrite};
use lafuse_compiler::hops::{Direction, OpKind};
use lafuse_runtime::kernels::partial::col_aggregate_of_cbind;
use lafuse_runtime::lineage::cache::ReuseCache;
use lafuse_runtime::lineage::{ItemKind, Lineage};
use lafuse_runtime::value::Value;
use lafuse_runtime::Result;

pub(crate) struct ColAggregateOfCbind;

impl PartialRewrite for ColAggregateOfCbind {
    fn apply(&self, op: &Operation<'_>, cache: &ReuseCache) -> Result<Option<Value>> {
        let item = op.item;
        if item.kind() != ItemKind::Instruction || !item.opcode().starts_with("ua(") {
            return Ok(None);
        }
        let Ok(OpKind::AggUnary {
            op: agg,
            dir: Direction::Col,
        }) = serde_json::from_str::<OpKind>(item.data())
        else {
            return Ok(None);
        };
        let [z] = item.inputs() else {
            return Ok(None);
        };
        let Some((x, _)) = cbind_of_two(z) else {
            return Ok(None);
        };
        let (Some(zv), 1) = (op.dense(0), op.operands.len()) else {
            return Ok(None);
        };
        // The aggregate of X is this item's operation over X's item.
        let part = Lineage::instruction(item.opcode(), item.data(), vec![x.clone()]);
        let Some(left) = dense_part(cache, &part) else {
            return Ok(None);
        };
        if left.rows() != 1 || left.cols() >= zv.cols {
            return Ok(None);
        }
        Ok(Some(Value::matrix(col_aggregate_of_cbind(&left, zv, agg)?)))
    }
}
