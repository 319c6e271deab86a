package main

import (
	"encoding/json"
	"os"
	"path/filepath"

	"revd/bench/internal/report"
)

// writeReport writes report.md, the charts and results.json (the whole
// suite, for other tools) into the results folder.
func (h *harness) writeReport() error {
	charts := report.Charts(h.suite)
	for _, c := range charts {
		if err := os.WriteFile(filepath.Join(h.outDir, c.Name), c.SVG, 0o644); err != nil {
			return err
		}
	}
	f, err := os.Create(filepath.Join(h.outDir, "report.md"))
	if err != nil {
		return err
	}
	if err := report.Markdown(f, h.suite, charts); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	js, err := json.MarshalIndent(h.suite, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(h.outDir, "results.json"), js, 0o644)
}
