package testnet

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"time"
)

// IperfResult is what one iperf3 TCP run measured.
type IperfResult struct {
	Mbps           float64 // received, as iperf3 reports at the end
	SenderCPU      float64 // percent of one core, host total, at the sender
	ReceiverCPU    float64
	Retransmits    int
	DurationSecond float64
}

// Iperf runs an iperf3 TCP test from client to server (the address dst,
// which must be the server's) for the given time with the given number of
// parallel streams. The server is started for exactly one test (-1) and is
// killed by PID if it outlives it.
func Iperf(server, client *NS, dst netip.Addr, streams int, d time.Duration) (IperfResult, error) {
	port := "5201"
	srv := server.Command("iperf3", "-s", "-1", "-p", port, "-B", dst.String())
	if err := srv.Start(); err != nil {
		return IperfResult{}, fmt.Errorf("start iperf3 server in %s: %w", server.Name, err)
	}
	defer func() {
		srv.Process.Kill()
		srv.Wait()
	}()
	// The server needs a moment before it listens.
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, _ := server.Output("ss", "-Htln", "sport", "= :"+port)
		if out != "" {
			break
		}
		if time.Now().After(deadline) {
			return IperfResult{}, fmt.Errorf("iperf3 server in %s is not listening after 5 s", server.Name)
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, err := client.Output("iperf3", "-c", dst.String(), "-p", port, "-J",
		"-t", strconv.Itoa(int(d.Seconds())), "-P", strconv.Itoa(streams), "--connect-timeout", "2000")
	if err != nil && out == "" {
		return IperfResult{}, fmt.Errorf("iperf3 %s -> %s: %w", client.Name, dst, err)
	}
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
				Seconds       float64 `json:"seconds"`
			} `json:"sum_received"`
			SumSent struct {
				Retransmits int `json:"retransmits"`
			} `json:"sum_sent"`
			CPU struct {
				HostTotal   float64 `json:"host_total"`
				RemoteTotal float64 `json:"remote_total"`
			} `json:"cpu_utilization_percent"`
		} `json:"end"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return IperfResult{}, fmt.Errorf("iperf3 output: %w", err)
	}
	if r.Error != "" {
		return IperfResult{}, fmt.Errorf("iperf3: %s", r.Error)
	}
	return IperfResult{
		Mbps:           r.End.SumReceived.BitsPerSecond / 1e6,
		SenderCPU:      r.End.CPU.HostTotal,
		ReceiverCPU:    r.End.CPU.RemoteTotal,
		Retransmits:    r.End.SumSent.Retransmits,
		DurationSecond: r.End.SumReceived.Seconds,
	}, nil
}
