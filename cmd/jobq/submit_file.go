package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/client"
)

// SubmitFileFlags configure `jobq submit --file`.
type SubmitFileFlags struct {
	File        string `help:"Submit every job of this NDJSON file ('-' for stdin): one POST /v1/jobs body per line, blank lines skipped. The file is streamed in batches of --batch-size (POST /v1/jobs:batch, or SubmitJobs with --transport grpc); a progress bar is drawn when stderr is a terminal. Each job is answered as a single submit would be: a line that is invalid or whose job_key names a different request is reported on stderr with its line number, and the command exits 1 after the whole file. Re-running a file is safe: jobs already created answer existing." type:"existingfile" placeholder:"jobs.ndjson"`
	BatchSize   int    `help:"Jobs per batch request, 1–1000." default:"1000"`
	Concurrency int    `help:"Batch requests in flight at once, 1–16." default:"2"`
}

// batchAPI is what --file calls: *client.Client sends each line as is (the
// server decodes it strictly); *client.GRPCClient gets lines decoded here.
type batchAPI interface {
	SubmitBatch(ctx context.Context, jobs []apitype.SubmitRequest) (apitype.SubmitBatchResponse, error)
}

type fileBatch struct {
	lines []int             // line number of each job
	raw   []json.RawMessage // the jobs, as read
	bytes int64             // bytes of the file these lines span
	// local holds, by index, jobs judged invalid here (a line that is not
	// JSON); their results are replaced after the server's answer.
	local map[int]string
}

// fileSummary is what `jobq submit --file` prints on stdout at the end.
type fileSummary struct {
	Jobs     int `json:"jobs"`
	Created  int `json:"created"`
	Existing int `json:"existing"`
	Conflict int `json:"conflict"`
	Invalid  int `json:"invalid"`
}

func (f SubmitFileFlags) run(g *Globals, sf ServerFlags) error {
	if f.BatchSize < 1 || f.BatchSize > apitype.MaxBatchJobs {
		return fmt.Errorf("--batch-size: must be in [1, %d], got %d", apitype.MaxBatchJobs, f.BatchSize)
	}
	if f.Concurrency < 1 || f.Concurrency > 16 {
		return fmt.Errorf("--concurrency: must be in [1, 16], got %d", f.Concurrency)
	}
	in, size := io.Reader(os.Stdin), int64(0)
	if f.File != "-" {
		fh, err := os.Open(f.File)
		if err != nil {
			return err
		}
		defer fh.Close()
		if st, err := fh.Stat(); err == nil && st.Mode().IsRegular() {
			size = st.Size()
		}
		in = fh
	}
	submit := batchSender(sf)
	bar := newProgress(os.Stderr, size)
	var (
		mu       sync.Mutex
		sum      fileSummary
		problems int
		firstErr error
	)
	report := func(b fileBatch, res apitype.SubmitBatchResponse, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("lines %d–%d: %w", b.lines[0], b.lines[len(b.lines)-1], err)
			}
			return
		}
		for i, msg := range b.local {
			if i < len(res.Results) {
				res.Results[i] = apitype.SubmitBatchResult{Status: apitype.BatchInvalid,
					Error: &apitype.ErrorDetail{Code: "invalid_argument", Field: "body", Message: msg}}
			}
		}
		for i, r := range res.Results {
			sum.Jobs++
			switch r.Status {
			case apitype.BatchCreated:
				sum.Created++
			case apitype.BatchExisting:
				sum.Existing++
			case apitype.BatchConflict:
				sum.Conflict++
			case apitype.BatchInvalid:
				sum.Invalid++
			}
			if r.Error != nil {
				problems++
				bar.clear()
				fmt.Fprintf(os.Stderr, "line %d: %s: %s\n", b.lines[i], r.Status, r.Error.Message)
			}
		}
		bar.add(b.bytes, len(res.Results))
	}
	batches := make(chan fileBatch, f.Concurrency)
	var wg sync.WaitGroup
	for range f.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				res, err := submitWithRetry(g.Ctx, submit, b)
				report(b, res, err)
			}
		}()
	}
	readErr := readBatches(in, f.BatchSize, batches, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstErr != nil
	})
	close(batches)
	wg.Wait()
	bar.done()
	if err := errors.Join(readErr, firstErr); err != nil {
		return err
	}
	if err := printJSON(sum); err != nil {
		return err
	}
	if problems > 0 {
		return fmt.Errorf("%d of %d jobs were not submitted (invalid %d, conflict %d); see the lines above", problems, sum.Jobs, sum.Invalid, sum.Conflict)
	}
	return nil
}

// readBatches streams in, line by line (no line-length limit), into batches
// of up to size jobs; a line that is not JSON is sent as {} and answered
// invalid here.
func readBatches(in io.Reader, size int, out chan<- fileBatch, stop func() bool) error {
	r := bufio.NewReaderSize(in, 1<<20)
	b := fileBatch{}
	line := 0
	for !stop() {
		text, err := r.ReadBytes('\n')
		if len(text) > 0 {
			line++
			b.bytes += int64(len(text))
			if t := bytes.TrimSpace(text); len(t) > 0 {
				if !json.Valid(t) {
					if b.local == nil {
						b.local = map[int]string{}
					}
					b.local[len(b.raw)] = "body: must be one JSON object per line (this line is not valid JSON)"
					t = json.RawMessage(`{}`)
				}
				b.lines = append(b.lines, line)
				b.raw = append(b.raw, json.RawMessage(t))
			}
		}
		if len(b.raw) == size || (err != nil && len(b.raw) > 0) {
			out <- b
			b = fileBatch{}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// batchSender returns the call that sends one batch over the chosen transport.
func batchSender(sf ServerFlags) func(ctx context.Context, raw []json.RawMessage) (apitype.SubmitBatchResponse, error) {
	if sf.Transport == "grpc" {
		c := sf.client().(batchAPI)
		return func(ctx context.Context, raw []json.RawMessage) (apitype.SubmitBatchResponse, error) {
			reqs := make([]apitype.SubmitRequest, len(raw))
			bad := map[int]string{}
			for i, m := range raw {
				dec := json.NewDecoder(bytes.NewReader(m))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&reqs[i]); err != nil {
					bad[i] = "body: " + err.Error()
					reqs[i] = apitype.SubmitRequest{} // answered invalid below
				}
			}
			res, err := c.SubmitBatch(ctx, reqs)
			if err == nil && len(res.Results) == len(raw) {
				for i, msg := range bad {
					res.Results[i] = apitype.SubmitBatchResult{Status: apitype.BatchInvalid,
						Error: &apitype.ErrorDetail{Code: "invalid_argument", Field: "body", Message: msg}}
				}
				res.Count()
			}
			return res, err
		}
	}
	c := client.New(sf.Server)
	c.Token = sf.Token
	return c.SubmitBatchRaw
}

// submitWithRetry sends one batch, retrying a batch that got no answer or a
// 503 up to 5 times with backoff (a batch is idempotent: its created jobs
// answer existing the second time).
func submitWithRetry(ctx context.Context, send func(context.Context, []json.RawMessage) (apitype.SubmitBatchResponse, error), b fileBatch) (apitype.SubmitBatchResponse, error) {
	var res apitype.SubmitBatchResponse
	var err error
	backoff := 200 * time.Millisecond
	for try := 0; try < 5; try++ {
		res, err = send(ctx, b.raw)
		var ae *client.APIError
		if err == nil || ctx.Err() != nil || (errors.As(err, &ae) && ae.Status != 503) {
			return res, err
		}
		select {
		case <-ctx.Done():
			return res, err
		case <-time.After(backoff):
		}
		backoff *= 2
	}
	return res, err
}

// progress draws a one-line progress bar on w when w is a terminal: bytes
// read of the file's size (or jobs sent, for stdin) and the job rate.
type progress struct {
	w      *os.File
	on     bool
	size   int64
	bytes  int64
	jobs   int
	start  time.Time
	drawn  time.Time
	length int
}

func newProgress(w *os.File, size int64) *progress {
	return &progress{w: w, on: term.IsTerminal(int(w.Fd())), size: size, start: time.Now()}
}

func (p *progress) add(bytes int64, jobs int) {
	p.bytes += bytes
	p.jobs += jobs
	if p.on && time.Since(p.drawn) > 100*time.Millisecond {
		p.draw()
	}
}

func (p *progress) draw() {
	rate := float64(p.jobs) / max(time.Since(p.start).Seconds(), 1e-3)
	var line string
	if p.size > 0 {
		frac := min(float64(p.bytes)/float64(p.size), 1)
		n := int(frac * 30)
		line = fmt.Sprintf("[%s%s] %3.0f%%  %d jobs  %.0f jobs/s", strings.Repeat("#", n), strings.Repeat(" ", 30-n), frac*100, p.jobs, rate)
	} else {
		line = fmt.Sprintf("%d jobs  %.0f jobs/s", p.jobs, rate)
	}
	fmt.Fprintf(p.w, "\r%-*s", p.length, line)
	p.length = len(line)
	p.drawn = time.Now()
}

// clear erases the bar so a message can be printed on its own line.
func (p *progress) clear() {
	if p.on && p.length > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.length))
		p.length = 0
	}
}

func (p *progress) done() {
	if p.on {
		p.draw()
		fmt.Fprintln(p.w)
	}
}
