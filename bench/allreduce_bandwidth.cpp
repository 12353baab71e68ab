// OSU-style MPI_Allreduce latency and bandwidth (issue 36's reference for the
// replica gradient all-reduce): float sums of 1 KiB ... 64 MiB (powers of 2;
// --min/--max in bytes), each size `warmup` untimed iterations and then
// `iterations` timed ones. Every timed iteration starts after an
// MPI_Barrier, is timed on each rank with MPI_Wtime and takes the slowest
// rank's time (MPI_Reduce MAX: OSU's "max latency"); the figures per size are
// the minimum and the median of those iterations, and the algorithm
// bandwidth bytes / time (the message's bytes, not the bytes on the wire:
// with 2 ranks the "bus bandwidth" 2(n-1)/n × algbw equals it). Not a test.
//
//   bench/allreduce_bandwidth.sh [--json FILE] [--min BYTES] [--max BYTES]
//       [--iterations N] [--warmup N]
//
// (the script compiles this with mpicxx -O2 into a temporary directory and
// runs it under mpirun --oversubscribe -np 2). Rank 0 prints a table and,
// with --json, writes {"ranks", "sizes": [{"bytes", "iterations",
// "min_us", "median_us", "algbw_min_MBps", "algbw_median_MBps"}...]}:
// the file bench/pipeline_execution.py --osu reads.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Options {
  long long minBytes = 1024, maxBytes = 64ll << 20;
  int iterations = 0, warmup = 0; // 0: by size (below)
  std::string json;
};

// OSU's defaults scaled down for a 2-core machine: many iterations for small
// messages, fewer for large ones.
int iterationsFor(long long bytes, const Options &o) {
  if (o.iterations > 0)
    return o.iterations;
  if (bytes <= (64 << 10))
    return 500;
  if (bytes <= (1 << 20))
    return 100;
  if (bytes <= (8 << 20))
    return 30;
  return 15;
}

int warmupFor(long long bytes, const Options &o) {
  if (o.warmup > 0)
    return o.warmup;
  return bytes <= (1 << 20) ? 20 : 3;
}

bool parse(int argc, char **argv, Options &o, int rank) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char * {
      if (i + 1 >= argc) {
        if (rank == 0)
          std::fprintf(stderr, "allreduce_bandwidth: %s needs a value\n", a.c_str());
        return nullptr;
      }
      return argv[++i];
    };
    const char *v = nullptr;
    if (a == "--json" && (v = value()))
      o.json = v;
    else if (a == "--min" && (v = value()))
      o.minBytes = std::atoll(v);
    else if (a == "--max" && (v = value()))
      o.maxBytes = std::atoll(v);
    else if (a == "--iterations" && (v = value()))
      o.iterations = std::atoi(v);
    else if (a == "--warmup" && (v = value()))
      o.warmup = std::atoi(v);
    else {
      if (rank == 0)
        std::fprintf(stderr,
                     "usage: allreduce_bandwidth [--json FILE] [--min BYTES] [--max BYTES] "
                     "[--iterations N] [--warmup N]\n");
      return false;
    }
  }
  if (o.minBytes < 4 || o.maxBytes < o.minBytes) {
    if (rank == 0)
      std::fprintf(stderr, "allreduce_bandwidth: need 4 <= --min <= --max\n");
    return false;
  }
  return true;
}

struct Row {
  long long bytes;
  int iterations;
  double minUs, medianUs;
};

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Options o;
  if (!parse(argc, argv, o, rank)) {
    MPI_Finalize();
    return 2;
  }
  const long long maxCount = o.maxBytes / 4;
  std::vector<float> send(maxCount), recv(maxCount);
  for (long long i = 0; i < maxCount; ++i)
    send[i] = float((i % 97) * 0.25 + rank);
  std::vector<Row> rows;
  if (rank == 0)
    std::printf("# MPI_Allreduce(MPI_FLOAT, MPI_SUM), %d ranks; per iteration the slowest "
                "rank's time after a barrier\n"
                "%12s %6s %12s %12s %14s %14s\n",
                size, "bytes", "iters", "min (us)", "median (us)", "algbw min MB/s",
                "algbw med MB/s");
  for (long long bytes = o.minBytes; bytes <= o.maxBytes; bytes *= 2) {
    const int count = int(bytes / 4);
    const int iterations = iterationsFor(bytes, o), warmup = warmupFor(bytes, o);
    for (int i = 0; i < warmup; ++i)
      MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    std::vector<double> times;
    for (int i = 0; i < iterations; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double t = MPI_Wtime() - t0, slowest = 0;
      MPI_Reduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      times.push_back(slowest);
    }
    if (rank == 0) {
      std::sort(times.begin(), times.end());
      double median = times.size() % 2 ? times[times.size() / 2]
                                       : 0.5 * (times[times.size() / 2 - 1] +
                                                times[times.size() / 2]);
      Row row{bytes, iterations, times.front() * 1e6, median * 1e6};
      rows.push_back(row);
      std::printf("%12lld %6d %12.2f %12.2f %14.1f %14.1f\n", bytes, iterations, row.minUs,
                  row.medianUs, bytes / row.minUs, bytes / row.medianUs);
      std::fflush(stdout);
    }
  }
  if (rank == 0 && !o.json.empty()) {
    FILE *f = std::fopen(o.json.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "allreduce_bandwidth: cannot write %s\n", o.json.c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    std::fprintf(f, "{\"benchmark\": \"MPI_Allreduce float sum, OSU-style\", \"ranks\": %d, "
                    "\"sizes\": [",
                 size);
    for (size_t i = 0; i < rows.size(); ++i)
      std::fprintf(f,
                   "%s\n  {\"bytes\": %lld, \"iterations\": %d, \"min_us\": %.3f, "
                   "\"median_us\": %.3f, \"algbw_min_MBps\": %.3f, "
                   "\"algbw_median_MBps\": %.3f}",
                   i ? "," : "", rows[i].bytes, rows[i].iterations, rows[i].minUs,
                   rows[i].medianUs, rows[i].bytes / rows[i].minUs,
                   rows[i].bytes / rows[i].medianUs);
    std::fprintf(f, "\n]}\n");
    std::fclose(f);
    std::printf("# written %s\n", o.json.c_str());
  }
  MPI_Finalize();
  return 0;
}
