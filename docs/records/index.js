// The records index (records/index.md, written by `kbgen render`): a click on a column's heading
// sorts its table by that column, a box filters its rows, and a few hundred rows are shown at a
// time. Without this script the table is complete, newest first. The table is read from the page
// as the browser built it: rows are only reordered and hidden, and no text of a record is ever
// written as HTML.
(() => {
  "use strict";

  const STYLE = `
.kbgen-records { display: flex; flex-wrap: wrap; gap: .5em 1em; align-items: center; }
.kbgen-records input { flex: 1 1 20em; max-width: 36em; padding: .4em .6em; font: inherit;
  color: inherit; background: transparent; border-radius: .2em;
  border: 1px solid var(--md-default-fg-color--lighter, #999); }
.kbgen-records output { color: var(--md-default-fg-color--light, #666); }
table[data-kbgen-table] td:first-child { white-space: nowrap; }
table[data-kbgen-table] td:nth-child(2) { min-width: 16em; }
table[data-kbgen-table] td:last-child { min-width: 20em; }
button.kbgen-more[hidden] { display: none; }
th > button.kbgen-sort { font: inherit; color: inherit; background: none; border: 0;
  padding: 0; cursor: pointer; text-align: inherit; }
th[aria-sort="ascending"] > button.kbgen-sort::after { content: " ▲"; }
th[aria-sort="descending"] > button.kbgen-sort::after { content: " ▼"; }`;
  const PAGE = 500;
  const CHANGE = /[-+]?\d+(?:\.\d+)?(?=%)/; // an effect cell's first change: -52.6% … → -52.6
  const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });

  // The table that follows the page's `data-kbgen-records` element, if this page has one.
  function tableAfter(marker) {
    for (const table of document.querySelectorAll("table")) {
      if (marker.compareDocumentPosition(table) & Node.DOCUMENT_POSITION_FOLLOWING) return table;
    }
    return null;
  }

  // What a cell sorts by: an effect by its number (none: last), anything else by its text.
  function sortKey(column, text) {
    if (column !== "effect") return text;
    const found = CHANGE.exec(text);
    return found ? Number(found[0]) : null;
  }

  function compare(a, b) {
    if (typeof a === "number" && typeof b === "number") return a - b;
    return collator.compare(String(a), String(b));
  }

  // The query's terms, lower-case: words, "quoted phrases", and `column:word` for one column
  // (any start of a column's name: `verdict:refuted`, `hard:h200`).
  function terms(query, columns) {
    const out = [];
    for (const [, quoted, word] of query.toLowerCase().matchAll(/"([^"]*)"|(\S+)/g)) {
      const term = quoted ?? word;
      const scoped = /^([a-z]+):(.+)$/.exec(term);
      const column = scoped ? columns.findIndex((name) => name.startsWith(scoped[1])) : -1;
      if (column >= 0) out.push({ column, text: scoped[2] });
      else if (term) out.push({ column: -1, text: term });
    }
    return out;
  }

  function enhance() {
    const marker = document.querySelector("[data-kbgen-records]");
    if (!marker || marker.dataset.kbgenReady) return;
    const table = tableAfter(marker);
    if (!table || !table.tHead || !table.tBodies[0]) return;
    marker.dataset.kbgenReady = "true";
    table.dataset.kbgenTable = ""; // not a class: Material styles only tables without one
    if (!document.getElementById("kbgen-records-style")) {
      const style = document.createElement("style");
      style.id = "kbgen-records-style";
      style.textContent = STYLE;
      document.head.append(style);
    }
    const body = table.tBodies[0];
    const heads = [...table.tHead.rows[0].cells];
    const columns = heads.map((th) => th.textContent.trim().toLowerCase());
    const rows = [...body.rows].map((tr) => {
      const cells = [...tr.cells].map((td) => td.textContent.trim());
      const lower = cells.map((text) => text.toLowerCase());
      return { tr, cells, lower, all: lower.join("\n") };
    });

    // rows shown at a time (the marker's value, else PAGE): the browser takes seconds to lay out
    // a table of thousands of rows, and a reader reads the first few hundred
    const page = Number.parseInt(marker.dataset.kbgenRecords, 10) || PAGE;
    const input = document.createElement("input");
    input.type = "search";
    input.placeholder = "Filter: words, \"a phrase\", or column:word (verdict:refuted)";
    input.setAttribute("aria-label", "Filter the records");
    const count = document.createElement("output");
    count.setAttribute("aria-live", "polite");
    const more = document.createElement("button");
    more.type = "button";
    more.className = "md-button kbgen-more";
    marker.append(input, count);
    table.after(more);

    let order = rows; // as sorted
    let wanted = [];
    let limit = page;
    function update() {
      let matched = 0;
      for (const row of order) {
        const hit = wanted.every(({ column, text }) =>
          (column < 0 ? row.all : row.lower[column] ?? "").includes(text),
        );
        const hide = !hit || matched >= limit;
        if (row.tr.hidden !== hide) row.tr.hidden = hide;
        matched += hit;
      }
      const shown = Math.min(matched, limit);
      count.value = `${matched} of ${rows.length} records`;
      if (shown < matched) count.value += `, the first ${shown} shown`;
      more.hidden = shown >= matched;
      more.textContent = `Show ${Math.min(page, matched - shown)} more`;
      marker.dataset.kbgenFiltered = input.value; // what the rows shown were filtered by
    }

    let sorted = { column: columns.indexOf("date"), descending: true };
    function sort(column, descending) {
      sorted = { column, descending };
      const keyed = rows.map((row) => [sortKey(columns[column], row.cells[column] ?? ""), row]);
      keyed.sort(([a], [b]) => {
        if (a === null || b === null) return (a === null) - (b === null); // no number: last
        return descending ? compare(b, a) : compare(a, b);
      });
      order = keyed.map(([, row]) => row);
      const moved = document.createDocumentFragment();
      for (const row of order) moved.append(row.tr);
      body.append(moved);
      heads.forEach((th, i) => {
        if (i === column) th.setAttribute("aria-sort", descending ? "descending" : "ascending");
        else th.removeAttribute("aria-sort");
      });
      limit = page;
      update();
    }

    heads.forEach((th, column) => {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "kbgen-sort";
      button.title = `Sort by ${th.textContent.trim()}`;
      button.append(...th.childNodes);
      th.append(button);
      button.addEventListener("click", () => {
        const again = sorted.column === column;
        // a first click sorts dates newest first, anything else from the lowest
        sort(column, again ? !sorted.descending : columns[column] === "date");
      });
    });
    if (sorted.column >= 0) heads[sorted.column].setAttribute("aria-sort", "descending");

    let pending = 0;
    input.addEventListener("input", () => {
      clearTimeout(pending);
      pending = setTimeout(() => {
        wanted = terms(input.value, columns);
        limit = page;
        update();
      }, rows.length > page ? 150 : 0);
    });
    more.addEventListener("click", () => {
      limit += page;
      update();
    });
    update();
  }

  // At once (the page is parsed up to this script, the table with it), before the browser lays
  // out all its rows; else once it is parsed; and on every page that Material's instant
  // navigation swaps in (`document$`), which runs a page's scripts again: one subscription
  enhance();
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", enhance);
  if (typeof document$ !== "undefined" && !window.kbgenRecordsIndex) document$.subscribe(enhance);
  window.kbgenRecordsIndex = true;
})();
