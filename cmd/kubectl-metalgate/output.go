package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"
)

// outputFormat is -o/--output: how a listing prints its rows.
type outputFormat string

const (
	outputTable outputFormat = ""     // columns, as kubectl get
	outputWide  outputFormat = "wide" // the table with more columns
	outputJSON  outputFormat = "json" // {"kind": "...List", "items": [...]}
	outputYAML  outputFormat = "yaml" // the same document as YAML
)

// outputFormats are the values -o takes, as said in errors and help.
const outputFormats = "json, yaml, wide"

// parseOutput reads -o's value.
func parseOutput(s string) (outputFormat, error) {
	switch f := outputFormat(s); f {
	case outputTable, outputWide, outputJSON, outputYAML:
		return f, nil
	}
	return "", fmt.Errorf("flag -o/--output: unknown format %q; allowed: %s", s, outputFormats)
}

// structured says format is a document (json, yaml), not a table.
func structured(format outputFormat) bool { return format == outputJSON || format == outputYAML }

// column is one column of a listing's table: its header, whether only -o wide shows it, and
// its cell for a row.
type column[R any] struct {
	header string
	wide   bool
	cell   func(R) string
}

// list is the document -o json and -o yaml print: a stable shape for scripts, the rows'
// fields named in lowerCamelCase as the API's are.
type list[R any] struct {
	Kind  string `json:"kind"`
	Items []R    `json:"items"`
}

// printList prints items in format: a table of cols (wide columns only for -o wide), or a
// kind document as JSON or YAML.
func printList[R any](out io.Writer, format outputFormat, kind string, items []R, cols []column[R]) error {
	if items == nil {
		items = []R{} // "items": [], never null
	}
	switch format {
	case outputJSON:
		b, err := json.MarshalIndent(list[R]{Kind: kind, Items: items}, "", "  ")
		if err != nil {
			return fmt.Errorf("encode %s as JSON: %w", kind, err)
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	case outputYAML:
		b, err := yaml.Marshal(list[R]{Kind: kind, Items: items})
		if err != nil {
			return fmt.Errorf("encode %s as YAML: %w", kind, err)
		}
		_, err = out.Write(b)
		return err
	}
	var shown []column[R]
	for _, c := range cols {
		if !c.wide || format == outputWide {
			shown = append(shown, c)
		}
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	cells := make([]string, len(shown))
	for i, c := range shown {
		cells[i] = c.header
	}
	fmt.Fprintln(w, strings.Join(cells, "\t"))
	for _, r := range items {
		for i, c := range shown {
			cells[i] = c.cell(r)
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	return w.Flush()
}

// dashJoin is the cell of a list: its values joined by commas, "-" when empty.
func dashJoin(vs []string) string { return orDash(strings.Join(vs, ",")) }
