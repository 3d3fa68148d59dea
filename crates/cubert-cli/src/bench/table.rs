//! Plain-text tables with aligned columns: the CLI's table (a header and rows of cells,
//! each column left- or right-aligned) laid out by `comfy-table` without borders.

/// How a column is aligned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// Text starts at the left edge.
    Left,
    /// Text ends at the right edge (numbers).
    Right,
}

/// A table: a header row and rows of cells, rendered with two spaces between columns.
#[derive(Clone, Debug)]
pub struct Table {
    headers: Vec<String>,
    aligns: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns.
    pub fn new(columns: &[(&str, Align)]) -> Self {
        Self {
            headers: columns
                .iter()
                .map(|(name, _)| (*name).to_string())
                .collect(),
            aligns: columns.iter().map(|(_, align)| *align).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells are empty, extra cells are kept (left-aligned).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Whether the table has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as lines of text (no trailing spaces), header first, columns two spaces
    /// apart (laid out by `comfy-table`).
    pub fn render(&self) -> String {
        use comfy_table::{CellAlignment, ContentArrangement, TableComponent, presets};
        let mut table = comfy_table::Table::new();
        table
            .load_preset(presets::NOTHING)
            .set_content_arrangement(ContentArrangement::Disabled)
            .remove_style(TableComponent::LeftBorder)
            .remove_style(TableComponent::RightBorder)
            .remove_style(TableComponent::HeaderLines)
            .remove_style(TableComponent::VerticalLines)
            .set_header(self.headers.clone());
        for row in &self.rows {
            table.add_row(row.clone());
        }
        for (i, column) in table.column_iter_mut().enumerate() {
            // No vertical lines: two spaces of padding after each column.
            column.set_padding((0, 2));
            column.set_cell_alignment(match self.aligns.get(i) {
                Some(Align::Right) => CellAlignment::Right,
                _ => CellAlignment::Left,
            });
        }
        table
            .lines()
            .map(|line| line.trim_end().to_string() + "\n")
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_aligned() {
        let mut table = Table::new(&[("name", Align::Left), ("value", Align::Right)]);
        table.row(vec!["a".into(), "1.5".into()]);
        table.row(vec!["longer".into(), "10".into()]);
        assert_eq!(
            table.render(),
            "name    value\na         1.5\nlonger     10\n"
        );
    }
}
