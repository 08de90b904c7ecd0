"""The Spark drivers seqdedup starts (a local session, the dbt adapter's) log errors only from the JVM's start, through
seqdedup's log4j2 configuration, unless the user chose a log4j configuration: then theirs is kept. No JVM starts
here; tests/dbt/test_spark_processes.py checks a real dbt process's console."""
from __future__ import annotations

import re
import shlex

import pytest

from seqdedup.extensions.spark import LOG4J2, quiet_java_options

#: Where the user may name a log4j configuration, as environment variables.
USER_VARIABLES = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "SPARK_SUBMIT_OPTS", "PYSPARK_SUBMIT_ARGS",
                  "LOG4J_CONFIGURATION_FILE")


@pytest.fixture
def no_user_log4j(monkeypatch, tmp_path):
    """An environment in which the user chose no log4j configuration: an empty Spark configuration folder."""
    for name in USER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))
    (tmp_path / "conf").mkdir()
    return tmp_path / "conf"


def test_a_driver_seqdedup_starts_gets_its_log4j2_configuration_after_the_users_options(no_user_log4j):
    options = shlex.split(quiet_java_options("-Dderby.system.home=/data/spark\\ home"))
    assert options == ["-Dderby.system.home=/data/spark home", f"-Dlog4j2.configurationFile={LOG4J2.as_uri()}"]
    text = LOG4J2.read_text()
    assert re.search(r"^rootLogger\.level = error$", text, re.M)        # errors still show; WARN and below do not
    assert "appender.console.target = SYSTEM_ERR" in text


@pytest.mark.parametrize("where", ["options", "defaults", "JAVA_TOOL_OPTIONS", "PYSPARK_SUBMIT_ARGS",
                                   "LOG4J_CONFIGURATION_FILE", "log4j2.properties", "log4j2.xml",
                                   "spark-defaults.conf"])
def test_a_log4j_configuration_the_user_chose_is_kept(no_user_log4j, monkeypatch, where):
    option, chosen = "-Dderby.system.home=/data", ""
    named = "-Dlog4j2.configurationFile=/etc/spark/log4j2.xml"
    if where == "options":
        option = f"{option} {named}"
    elif where == "defaults":
        chosen = named            # the profile's spark.driver.defaultJavaOptions
    elif where == "LOG4J_CONFIGURATION_FILE":
        monkeypatch.setenv(where, "/etc/spark/log4j2.xml")
    elif where.isupper():
        monkeypatch.setenv(where, f"--driver-java-options {named}" if where == "PYSPARK_SUBMIT_ARGS" else named)
    elif where == "spark-defaults.conf":
        (no_user_log4j / where).write_text(f"spark.driver.extraJavaOptions {named}\n")
    else:
        (no_user_log4j / where).write_text("")
    assert quiet_java_options(option, chosen=chosen) == option


def test_a_template_in_sparks_configuration_folder_is_not_a_configuration(no_user_log4j):
    (no_user_log4j / "log4j2.properties.template").write_text("")
    (no_user_log4j / "spark-defaults.conf").write_text("spark.driver.memory 2g\n")
    assert "-Dlog4j2.configurationFile=" in quiet_java_options()


def test_the_java_options_of_sparks_defaults_file_are_kept(no_user_log4j):
    from seqdedup.dbt.spark import quiet_settings

    (no_user_log4j / "spark-defaults.conf").write_text("# site settings\nspark.driver.extraJavaOptions  -Xss4m\n"
                                                       "spark.driver.memory=2g\n")
    options = quiet_settings({})["spark.driver.extraJavaOptions"]
    assert options.split()[0] == "-Xss4m" and "-Dlog4j2.configurationFile=" in options
    assert quiet_settings({"spark.driver.extraJavaOptions": "-Xss8m"})["spark.driver.extraJavaOptions"].split()[0] \
        == "-Xss8m"      # the profile's replace the file's, as in Spark
