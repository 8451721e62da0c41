"""Simulated GPU sites: the deterministic demo month `make demo` and the tests run on
(`python -m simulator`, `simulator.demo.generate_demo`), and the pieces the benchmark generator
(benchmarks/generate.py) shares with it. Nothing in `pipelines` imports this package: it stands
in for the sites whose exports the pipeline reads.

    site        the GPUs and their sharing, tenants, accounts, people, both clusters' layouts
    workload    what atlas's users submit          scheduler   where and when it runs
    kube        the Kubernetes cluster's pods      telemetry   what each GPU reads, per sample
    figures     ground truth and promised cases    catalog     the catalog files
    writers/    one module per export format (slurm, kubernetes, dcgm, nvidia_smi, canonical)
    demo        generate_demo and the command line
"""
