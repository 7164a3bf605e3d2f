package tensorsched

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// stepXYs turns a memory timeline (bytes from T on) into a step line in
// milliseconds and GiB.
func stepXYs(tl []MemSample) plotter.XYs {
	xy := make(plotter.XYs, 0, 2*len(tl))
	for i, s := range tl {
		y := float64(s.Bytes) / (1 << 30)
		if i > 0 {
			xy = append(xy, plotter.XY{X: s.T * 1e3, Y: xy[len(xy)-1].Y})
		}
		xy = append(xy, plotter.XY{X: s.T * 1e3, Y: y})
	}
	return xy
}

// PlotMemory writes a PNG or SVG (by the file name's extension) of device
// memory over one iteration: the vanilla timeline against each scheduled one.
func PlotMemory(path, title string, vanilla []MemSample, scheduled map[string][]MemSample, order []string) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time in the iteration (ms)"
	p.Y.Label.Text = "device memory (GiB)"
	p.Add(plotter.NewGrid())
	colors := []color.RGBA{{0, 0, 0, 255}, {214, 39, 40, 255}, {31, 119, 180, 255}, {44, 160, 44, 255}, {255, 127, 14, 255}, {148, 103, 189, 255}, {140, 86, 75, 255}}
	add := func(name string, tl []MemSample, k int) error {
		if len(tl) == 0 {
			return nil
		}
		l, err := plotter.NewLine(stepXYs(tl))
		if err != nil {
			return err
		}
		l.Color = colors[k%len(colors)]
		l.Width = vg.Points(1)
		p.Add(l)
		p.Legend.Add(name, l)
		return nil
	}
	if err := add("vanilla", vanilla, 0); err != nil {
		return err
	}
	for i, name := range order {
		if err := add(name, scheduled[name], i+1); err != nil {
			return err
		}
	}
	p.Legend.Top = true
	if err := p.Save(8*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}
